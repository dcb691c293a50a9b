package dlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/lateproxy"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// A grant must never set a key shorter than the lease its grantee believes in.

// newLateProcessRT is newLateProcess with the go-redis ReadTimeout set to rt, so that a
// round trip held by the proxy is given up (and its connection closed) quickly.
func newLateProcessRT(t *testing.T, srv *redistest.Server, rt time.Duration, opts ...dlock.Option) *lateProcess {
	t.Helper()
	p := lateproxy.New(t, srv.Addr)
	o := srv.Options()
	o.Addr = p.Addr
	o.ReadTimeout = rt
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb, lateOptions(opts)...)
	ctx := ctxTimeout(t, 10*time.Second)
	if err := c.Mutex("late-warmup").Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	return &lateProcess{Client: c, proxy: p}
}

// askField returns field i (0 token, 1 ttl, 2 reserve, 3 expires, 4 seq) of the first
// standing request in the Mutex name's asks hash, or "".
func askField(rdb *redis.Client, name string, i int) string {
	m := rdb.HGetAll(context.Background(), keysOf(name).Asks).Val()
	for k, v := range m {
		if strings.HasSuffix(k, ":done") {
			continue
		}
		if f := strings.Fields(v); len(f) > i {
			return f[i]
		}
	}
	return ""
}

// A grant's lease must never be shorter than the lease its grantee believes it holds.
//
// Two handles of one process share the process's standing request: S with a short TTL
// and L with a long one. S is the head and refreshes the request with its TTL; an
// attempt of S is held back, S gives up, L becomes the head and refreshes the same
// request (same token, same number) with its TTL. Then S's attempt lands: it is not
// done (the request still stands), so it writes the request again with S's TTL. The
// holder's release then grants the request, and pass_on sets the key for
// min(S's TTL, grantLength), while L, taking the grant (takeGrant), believes it holds
// for min(L's TTL, grantLength) from when the request was made. The key expires long
// before L's lease, and another process takes the lock while L holds it.
func TestLateRefreshNeverShortensGrantedLease(t *testing.T) {
	srv, rdb := standalone(t)
	holder, other := newClient(t, rdb), newClient(t, rdb)
	a := newLateProcessRT(t, srv, 200*time.Millisecond)
	ctx := ctxTimeout(t, 20*time.Second)
	const name = "review-grant-ttl"
	const shortTTL = 100 * time.Millisecond

	first, err := holder.Mutex(name, dlock.TTL(300*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short := a.Mutex(name, dlock.TTL(shortTTL))
	long := a.Mutex(name, dlock.TTL(time.Minute))
	sctx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	shortDone := make(chan error, 1)
	go func() {
		l, err := short.Lock(sctx)
		if err == nil {
			_ = l.Unlock(ctx)
		}
		shortDone <- err
	}()
	waitUntil(t, 5*time.Second, "the short handle's request stands", mutexAsking(rdb, name))
	var lease *dlock.Lease
	longDone := make(chan error, 1)
	go func() {
		var err error
		lease, err = long.Lock(ctx)
		longDone <- err
	}()
	waitUntil(t, 5*time.Second, "both handles wait", func() bool { return dlock.LocalWaiters(long) == 2 })

	// Hold the short handle's next refresh (a mutex_acquire call: well over 150 bytes).
	h := a.proxy.HoldConnections()
	waitUntil(t, 5*time.Second, "a refresh of the short handle held", func() bool { return h.Len() > 150 })
	giveUp()
	if err := <-shortDone; err == nil {
		t.Fatal("the short handle took the lock through a held connection")
	}
	waitUntil(t, 5*time.Second, "the long handle refreshed the request with its TTL", func() bool {
		return askField(rdb, name, 1) == "60000"
	})
	time.Sleep(100 * time.Millisecond) // past the held round trip's read timeout
	h.Deliver()
	waitClosed(t, h.Landed(), 5*time.Second, "the held refresh's landing")
	if got := askField(rdb, name, 1); got != "100" {
		t.Fatalf("the late refresh did not rewrite the request (ttl field %q): the setup missed", got)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	grantedWithin(t, longDone, 5*time.Second, "long handle")
	defer func() { _ = lease.Unlock(ctx) }()
	pttl := rdb.PTTL(ctx, keysOf(name).Lock).Val()
	believed := time.Until(lease.ValidUntil())
	t.Logf("key PTTL %v, lease believes %v", pttl, believed.Round(time.Millisecond))
	time.Sleep(2 * shortTTL)
	if l, err := other.Mutex(name).TryLock(ctx); err == nil {
		defer func() { _ = l.Unlock(ctx) }()
		if lease.Err() == nil && time.Now().Before(lease.ValidUntil()) {
			t.Errorf("another process took the lock while the granted lease holds for %v more (key was set for %v)",
				time.Until(lease.ValidUntil()).Round(time.Millisecond), pttl)
		}
	}
}

// FairMutex waiters of one Client hear their grants on one channel, each grant naming its
// waiter (grant_channel.lua). w1 gives up with its leave held back, so the holder's
// release grants the lock to w1, which no longer waits. w2, of the same Client and queued
// behind it, hears that grant and must not take it; once the leave lands, it passes the
// lock on to w2, with the next fencing token.
func TestLateLeaveGrantTakenOnlyByItsWaiter(t *testing.T) {
	t.Parallel()
	srv, rdb := standalone(t)
	holder := newClient(t, rdb)
	a := newLateProcess(t, srv, dlock.WithOwner("late-a")) // tokens that begin with a Client id
	ctx := ctxTimeout(t, 30*time.Second)
	const name = "late-fair-channel"
	first, err := holder.FairMutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ctx1, giveUp := context.WithCancel(ctx)
	defer giveUp()
	w1 := make(chan error, 1)
	go func() {
		_, err := a.FairMutex(name).Lock(ctx1)
		w1 <- err
	}()
	waitUntil(t, 5*time.Second, "w1 queued", fairQueued(rdb, name, 1))
	var l2 *dlock.Lease
	w2 := make(chan error, 1)
	go func() {
		var err error
		l2, err = a.FairMutex(name).Lock(ctx)
		w2 <- err
	}()
	waitUntil(t, 5*time.Second, "w2 queued", fairQueued(rdb, name, 2))
	queue := keysOf(name).Queue()
	w1ID := rdb.LIndex(ctx, queue, 0).Val()

	h, done := a.hold(t, func() error {
		giveUp()
		return <-w1
	})
	if err := <-done; err == nil {
		t.Fatal("w1 took the lock through a held connection")
	}
	if got := rdb.LIndex(ctx, queue, 0).Val(); got != w1ID {
		t.Fatalf("queue head %q, want w1 %q: its leave was not held", got, w1ID)
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := rdb.Get(ctx, keysOf(name).Lock).Val(); got != w1ID {
		t.Fatalf("lock key %q after the release, want w1's id %q", got, w1ID)
	}
	select {
	case err := <-w2:
		t.Fatalf("w2 returned (err %v) on the grant to w1", err)
	case <-time.After(300 * time.Millisecond):
	}
	h.Deliver()
	waitClosed(t, h.Landed(), 10*time.Second, "the held leave's landing")
	grantedWithin(t, w2, 5*time.Second, "w2")
	if l2.Token() != first.Token()+2 {
		t.Errorf("w2's fencing token %d, want %d (w1's grant, then w2's)", l2.Token(), first.Token()+2)
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}
