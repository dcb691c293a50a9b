package dlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/lateproxy"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// Late requests: a request of a process may reach Redis after its caller gave up (a read
// timeout, then a retransmitted segment), and after later requests of the same process.
// The process below talks to its server through a lateproxy, which holds a request back
// on its connection and delivers it once the caller has moved on. Whatever lands late
// must not shorten a live lease's key, nor keep a free lock from a waiter for long.

// lateBound is how long a late request may keep a free lock from a waiter, beyond what
// the test allows for: generous for a loaded machine, well below the stalls it detects.
const lateBound = time.Second

// lateProcess is one process (a dlock Client) whose connections to its server pass
// through a lateproxy.
type lateProcess struct {
	*dlock.Client
	proxy *lateproxy.Proxy
}

// newLateProcess starts a proxy to srv and a Client through it, and has the Client open
// its connection (an uncontended Lock and Unlock of another name), so that a hold made
// next catches its next request.
func newLateProcess(t *testing.T, srv *redistest.Server, opts ...dlock.Option) *lateProcess {
	t.Helper()
	p := lateproxy.New(t, srv.Addr)
	o := srv.Options()
	o.Addr = p.Addr
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb, lateOptions(opts)...)
	ctx := ctxTimeout(t, 10*time.Second)
	if err := c.Mutex("late-warmup").Do(ctx, func(context.Context) error { return nil }); err != nil {
		t.Fatalf("warm-up: %v", err)
	}
	return &lateProcess{Client: c, proxy: p}
}

// lateOptions are the options of a late process: opts after WithOwner(""). The holds
// catch every connection open at the time, and an owner's write, which goes in a pipeline
// ahead of an acquisition or Extend, opens go-redis's pipeline pool, whose connection a
// hold would catch too, idle or not. These tests are about the locks' own requests; what
// a late owner write does is in internal/scripts (TestLateOwner).
func lateOptions(opts []dlock.Option) []dlock.Option {
	return append([]dlock.Option{dlock.WithOwner("")}, opts...)
}

// hold holds back the requests the process sends from now on over its open connections,
// and returns once start (run in the background) has had one of them held; start's
// result comes on the returned channel.
func (lp *lateProcess) hold(t *testing.T, start func() error) (*lateproxy.Held, <-chan error) {
	t.Helper()
	h := lp.proxy.HoldConnections()
	done := make(chan error, 1)
	go func() { done <- start() }()
	deadline := time.Now().Add(10 * time.Second)
	for h.Len() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("no request was held")
		}
		time.Sleep(time.Millisecond)
	}
	return h, done
}

// land waits until the process has closed the held connections (its go-redis client
// drops a connection whose read timed out), delivers h's requests, and returns once the
// server has run them.
func land(t *testing.T, h *lateproxy.Held) {
	t.Helper()
	waitUntil(t, 10*time.Second, "the held connections closed by the process", h.ClientsClosed)
	h.Deliver()
	waitClosed(t, h.Landed(), 10*time.Second, "the held request's landing")
}

// waitUntil polls cond every few milliseconds and fails the test if it is not true
// within d.
func waitUntil(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v", what, d)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// mutexAsking reports whether a process has a standing request for the Mutex name.
func mutexAsking(rdb *redis.Client, name string) func() bool {
	return func() bool { return rdb.HLen(context.Background(), keysOf(name).Asks).Val() > 0 }
}

// fairQueued reports whether at least n waiters are in the FairMutex name's queue.
func fairQueued(rdb redis.UniversalClient, name string, n int64) func() bool {
	return func() bool { return rdb.LLen(context.Background(), keysOf(name).Queue()).Val() >= n }
}

// keyCoversLease fails the test unless the lock key outlives what lease believes: its
// PTTL is at least ValidUntil minus now (read after the PTTL, so that the comparison
// favours the lease), while the lease holds.
func keyCoversLease(t *testing.T, rdb *redis.Client, key string, lease *dlock.Lease) {
	t.Helper()
	pttl, err := rdb.PTTL(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("PTTL %s: %v", key, err)
	}
	believed := time.Until(lease.ValidUntil())
	if lease.Err() != nil {
		t.Fatalf("the lease ended: %v", lease.Err())
	}
	if pttl < believed {
		t.Errorf("key %s expires in %v, but its lease believes it holds for %v more", key, pttl, believed.Round(time.Millisecond))
	}
}

// lockAfterLateAttempt has waiter wait for name behind a holder of another process, with
// its first attempt held back; once it holds (the holder's Unlock granted its standing
// request or waiter id), it extends its lease to a minute, and then the held attempt
// lands. It returns the waiter's lease.
// queued reports whether the waiter's later attempt has queued it in Redis.
func lockAfterLateAttempt(t *testing.T, holder *dlock.Client, a *lateProcess, lock func(context.Context, *dlock.Client) (*dlock.Lease, error), queued func() bool) *dlock.Lease {
	t.Helper()
	ctx := ctxTimeout(t, 30*time.Second)
	first, err := lock(ctx, holder)
	if err != nil {
		t.Fatal(err)
	}
	var lease *dlock.Lease
	h, done := a.hold(t, func() (err error) {
		lease, err = lock(ctx, a.Client)
		return err
	})
	// The attempt is held; the waiter's poll gives up, and its next attempt, on a new
	// connection, queues it.
	waitUntil(t, 10*time.Second, "the waiter's next attempt queued it", queued)
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	grantedWithin(t, done, 10*time.Second, "waiter")
	if err := lease.Extend(ctx, time.Minute); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	land(t, h)
	return lease
}

// A held-back first attempt of a Mutex waiter that lands after its standing request was
// granted and its lease extended must not shorten the key: another process would take
// the lock while the lease holds.
func TestLateAttemptNeverShortensMutexKey(t *testing.T) {
	t.Parallel()
	srv, rdb := standalone(t)
	holder := newClient(t, rdb)
	a := newLateProcess(t, srv)
	const ttl = 2 * time.Second
	lock := func(ctx context.Context, c *dlock.Client) (*dlock.Lease, error) {
		return c.Mutex("late-mutex", dlock.TTL(ttl)).Lock(ctx)
	}
	lease := lockAfterLateAttempt(t, holder, a, lock, mutexAsking(rdb, "late-mutex"))
	keyCoversLease(t, rdb, "dlock:late-mutex", lease)

	// Once the attempt's TTL has passed, no one else may take the lock.
	time.Sleep(ttl + 500*time.Millisecond)
	ctx := ctxTimeout(t, 10*time.Second)
	if l, err := holder.Mutex("late-mutex").TryLock(ctx); err == nil {
		t.Errorf("another process took the lock while the lease holds until %v (Err %v)", time.Until(lease.ValidUntil()).Round(time.Millisecond), lease.Err())
		_ = l.Unlock(ctx)
	}
}

// The same with a FairMutex: the held-back attempt carries the waiter's id, which the
// holder's release granted.
func TestLateAttemptNeverShortensFairMutexKey(t *testing.T) {
	t.Parallel()
	srv, rdb := standalone(t)
	holder := newClient(t, rdb)
	a := newLateProcess(t, srv)
	lock := func(ctx context.Context, c *dlock.Client) (*dlock.Lease, error) {
		return c.FairMutex("late-fair", dlock.TTL(2*time.Second)).Lock(ctx)
	}
	lease := lockAfterLateAttempt(t, holder, a, lock, fairQueued(rdb, "late-fair", 1))
	keyCoversLease(t, rdb, "dlock:late-fair", lease)
}

// One process locks a Mutex through a handle with a short TTL, whose first attempt is
// held back and whose Lock gives up, and through a handle with a long TTL, which waits
// behind it: the two share the process's standing request, so the long lease is granted
// the token that the short attempt carries. When that attempt lands, the key must still
// outlive the long lease, with no Extend.
func TestLateAttemptOfShortHandleNeverShortensLongLease(t *testing.T) {
	t.Parallel()
	srv, rdb := standalone(t)
	holder := newClient(t, rdb)
	a := newLateProcess(t, srv)
	ctx := ctxTimeout(t, 30*time.Second)
	const name = "late-handles"
	first, err := holder.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short := a.Mutex(name, dlock.TTL(2*time.Second))
	long := a.Mutex(name, dlock.TTL(time.Minute))
	sctx, giveUp := context.WithCancel(ctx)
	defer giveUp()
	h, shortDone := a.hold(t, func() error {
		l, err := short.Lock(sctx)
		if err == nil {
			_ = l.Unlock(ctx)
		}
		return err
	})
	longDone := make(chan error, 1)
	var lease *dlock.Lease
	go func() {
		var err error
		lease, err = long.Lock(ctx)
		longDone <- err
	}()
	// The long handle waits behind the short one in the process; then the short one's
	// caller gives up, and the long one asks with the process's standing request.
	waitUntil(t, 10*time.Second, "both handles wait", func() bool { return dlock.LocalWaiters(long) == 2 })
	giveUp()
	if err := <-shortDone; err == nil {
		t.Fatal("the short handle's Lock took the lock through a held connection")
	}
	waitUntil(t, 10*time.Second, "the long handle's attempt queued the process", mutexAsking(rdb, name))
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	grantedWithin(t, longDone, 10*time.Second, "long handle")
	// A grant may first come with a shorter lease, which the process lengthens to the
	// handle's TTL by itself; the late attempt lands on the minute-long lease.
	waitUntil(t, 30*time.Second, "the long lease holds for more than 10s", func() bool {
		return time.Until(lease.ValidUntil()) > 10*time.Second
	})
	land(t, h)
	keyCoversLease(t, rdb, keysOf(name).Lock, lease)
}

// A shortening Extend held back on its connection, which lands after a later Extend
// lengthened the lease, must not leave the key shorter than the lease believes.
func TestLateShorteningExtendNeverShortensKey(t *testing.T) {
	t.Parallel()
	srv, rdb := standalone(t)
	a := newLateProcess(t, srv)
	ctx := ctxTimeout(t, 30*time.Second)
	lease, err := a.Mutex("late-extend", dlock.TTL(30*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	h, shortened := a.hold(t, func() error { return lease.Extend(ctx, 2*time.Second) })
	select {
	case <-shortened: // gave up, or (with a fix that shortens locally) returned at once
	case <-time.After(10 * time.Second):
		t.Fatal("the shortening Extend did not return within 10s")
	}
	if err := lease.Extend(ctx, time.Minute); err != nil {
		t.Fatalf("lengthening Extend: %v", err)
	}
	land(t, h)
	keyCoversLease(t, rdb, "dlock:late-extend", lease)
}

// servedRun has the FairMutex name taken by a holder of one process, queues a1 and a2
// of process a behind it, releases it, and returns a2's lease once a1 has held and
// unlocked and a2 holds.
func servedRun(t *testing.T, ctx context.Context, holder, a *dlock.Client, rdb *redis.Client, name string, ttl time.Duration) *dlock.Lease {
	t.Helper()
	first, err := holder.FairMutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a1Done := make(chan error, 1)
	go func() {
		l, err := a.FairMutex(name, dlock.TTL(ttl)).Lock(ctx)
		if err == nil {
			err = l.Unlock(ctx)
		}
		a1Done <- err
	}()
	waitUntil(t, 10*time.Second, "a1 queued", fairQueued(rdb, name, 1))
	a2 := make(chan *dlock.Lease, 1)
	go func() {
		l, err := a.FairMutex(name, dlock.TTL(ttl)).Lock(ctx)
		if err != nil {
			t.Errorf("a2: %v", err)
		}
		a2 <- l
	}()
	waitUntil(t, 10*time.Second, "a2 queued", fairQueued(rdb, name, 2))
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-a1Done; err != nil {
		t.Fatalf("a1: %v", err)
	}
	l := <-a2
	if l == nil {
		t.FailNow()
	}
	return l
}

// FairMutex waiters already served must not wait again: once a1 and a2 of one process
// have been served and the key is lost (deleted here), the lock is free, and a waiter
// of a third process gets it at once, not after a served waiter's place runs out.
func TestServedFairWaitersNeverQueueAgain(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	holder, a, c := newClient(t, rdb), newClient(t, rdb), newClient(t, rdb)
	ctx := ctxTimeout(t, 30*time.Second)
	const name = "served"
	a2 := servedRun(t, ctx, holder, a, rdb, name, time.Second)
	defer func() { _ = a2.Unlock(ctx) }()
	if err := rdb.Del(ctx, keysOf(name).Lock).Err(); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	l, err := c.FairMutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waited := time.Since(start)
	_ = l.Unlock(ctx)
	if waited > lateBound {
		t.Errorf("the lock was free, yet a waiter of another process got it after %v (bound %v)", waited.Round(time.Millisecond), lateBound)
	}
}

// A held-back first attempt of a FairMutex waiter a1, landing while a1 holds by the
// grant its later attempt queued for, must not put the waiters of its process that are
// served after it (a2) back in the queue: once they are done, a waiter of a third
// process gets the lock at once. And no lease of the process that was released
// normally is reported lost.
func TestLateAttemptNeverRequeuesServedFairWaiters(t *testing.T) {
	t.Parallel()
	srv, rdb := standalone(t)
	var lost []dlock.HoldEnd
	var lostMu sync.Mutex
	obs := dlock.Observer{HoldEnded: func(e dlock.HoldEnd) {
		if e.Cause != dlock.NotLost {
			lostMu.Lock()
			lost = append(lost, e)
			lostMu.Unlock()
		}
	}}
	holder, c := newClient(t, rdb), newClient(t, rdb)
	a := newLateProcess(t, srv, dlock.WithObserver(obs))
	ctx := ctxTimeout(t, 30*time.Second)
	const name = "late-run"
	const ttl = 2 * time.Second
	first, err := holder.FairMutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a1 := make(chan *dlock.Lease, 1)
	h, _ := a.hold(t, func() error {
		l, err := a.FairMutex(name, dlock.TTL(ttl)).Lock(ctx)
		a1 <- l
		return err
	})
	waitUntil(t, 10*time.Second, "a1 queued by its next attempt", fairQueued(rdb, name, 1))
	a2 := make(chan *dlock.Lease, 1)
	go func() {
		l, err := a.FairMutex(name, dlock.TTL(ttl)).Lock(ctx)
		if err != nil {
			t.Errorf("a2: %v", err)
		}
		a2 <- l
	}()
	waitUntil(t, 10*time.Second, "a2 queued", fairQueued(rdb, name, 2))
	cGot := acquiredAt(t, ctx, func(ctx context.Context) (*dlock.Lease, error) { return c.FairMutex(name).Lock(ctx) })
	waitUntil(t, 10*time.Second, "c queued", fairQueued(rdb, name, 3))

	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l1 := <-a1
	if l1 == nil {
		t.Fatal("a1 failed")
	}
	land(t, h) // while a1 holds, a2 and c waiting
	if err := l1.Unlock(ctx); err != nil {
		t.Fatalf("a1 unlock: %v", err)
	}
	l2 := <-a2
	if l2 == nil {
		t.FailNow()
	}
	if err := l2.Unlock(ctx); err != nil {
		t.Fatalf("a2 unlock: %v", err)
	}
	freed := time.Now()
	select {
	case at := <-cGot:
		if at.IsZero() {
			t.FailNow()
		}
		if waited := at.Sub(freed); waited > lateBound {
			t.Errorf("the lock sat free %v after a2's Unlock while c waited (bound %v)", waited.Round(time.Millisecond), lateBound)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("c not granted within 20s")
	}
	lostMu.Lock()
	defer lostMu.Unlock()
	for _, e := range lost {
		t.Errorf("a lease of the process released normally was reported lost: token %d, %v (%v)", e.Token, e.Err, e.Cause)
	}
}

// A late attempt whose caller gave up (a TryLock, with a fresh token) may take a free
// lock, but only until its own TTL ends: a waiter of another process gets the lock no
// later than that, plus a bound.
func TestLateAbandonedAttemptHoldsAtMostItsTTL(t *testing.T) {
	t.Parallel()
	srv, rdb := standalone(t)
	a := newLateProcess(t, srv)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 30*time.Second)
	const name = "late-try"
	const ttl = 2 * time.Second
	calls := scriptCalls(t, rdb)
	h, tried := a.hold(t, func() error {
		tctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		l, err := a.Mutex(name, dlock.TTL(ttl)).TryLock(tctx)
		if err == nil {
			_ = l.Unlock(ctx)
		}
		return err
	})
	if err := <-tried; err == nil {
		t.Fatal("TryLock through a held connection succeeded")
	}
	// The process undoes the attempt it gave up on (on a new connection, once go-redis
	// dropped the held one): let that undo run first, so that the late attempt finds the
	// lock free and takes it. The held attempt runs no script until it lands.
	deadline := time.Now().Add(5 * time.Second)
	for scriptCalls(t, rdb) == calls && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	land(t, h)
	landed := time.Now()
	if v := rdb.Exists(ctx, keysOf(name).Lock).Val(); v == 0 {
		t.Log("the late attempt did not take the free lock")
	}
	l, err := c.Mutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waited := time.Since(landed)
	_ = l.Unlock(ctx)
	if waited > ttl+lateBound {
		t.Errorf("a late attempt of TTL %v kept the lock from a waiter for %v (bound %v)", ttl, waited.Round(time.Millisecond), ttl+lateBound)
	}
}

// grantedWithin fails unless the Lock of who, whose result comes on done, returns without
// error within d (of the release that should grant it).
func grantedWithin(t *testing.T, done <-chan error, d time.Duration, who string) {
	t.Helper()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("%s: %v", who, err)
		}
	case <-time.After(d):
		t.Fatalf("%s not granted within %v of the release", who, d)
	}
}

// TestLateAcquisitionNeverRevivesEndedLease: a token is served once. A copy of an
// acquisition held back until after its lease was unlocked takes nothing (Redis remembers
// the token it served), so a held-back Extend of that lease to an hour, landing after it,
// finds no key of its own to lengthen, and another process takes the free lock at once.
// Lock asks with its process's standing-request token (its first attempt does not
// stand); TryLock with a fresh token, and go-redis resends its held-back call on a new
// connection within the round trip's deadline.
func TestLateAcquisitionNeverRevivesEndedLease(t *testing.T) {
	for _, tt := range []struct {
		name string
		lock func(*dlock.Mutex, context.Context) (*dlock.Lease, error)
	}{
		{"Lock", (*dlock.Mutex).Lock},
		{"TryLock", (*dlock.Mutex).TryLock},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, rdb := standalone(t)
			other := newClient(t, rdb)
			a := newLateProcessRT(t, srv, 200*time.Millisecond)
			ctx := ctxTimeout(t, 20*time.Second)
			name := "revive-" + tt.name
			key := keysOf(name).Lock
			const ttl = 2 * time.Second

			var lease *dlock.Lease
			acquisition, locked := a.hold(t, func() (err error) {
				lease, err = tt.lock(a.Mutex(name, dlock.TTL(ttl)), ctx)
				return err
			})
			select {
			case err := <-locked:
				if err != nil {
					t.Fatalf("%s with its first copy held back: %v", tt.name, err)
				}
			case <-time.After(10 * time.Second):
				t.Fatalf("%s did not return within 10s", tt.name)
			}
			extend, extended := a.hold(t, func() error { return lease.Extend(ctx, time.Hour) })
			t.Logf("Extend, held back: %v", <-extended)
			if err := lease.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			land(t, acquisition)
			land(t, extend)
			if v, err := rdb.Get(ctx, key).Result(); err != redis.Nil {
				t.Errorf("after the late acquisition and the late Extend the key holds %q (PTTL %v), want it free", v, rdb.PTTL(ctx, key).Val())
			}
			l, err := other.Mutex(name).TryLock(ctx)
			if err != nil {
				t.Fatalf("the lock, held by no one, is refused: %v", err)
			}
			_ = l.Unlock(ctx)
		})
	}
}

// TestLateMultiMutexCopyNeverTakesBackLostName: a late copy of a MultiMutex acquisition
// never takes back a name taken from its lease. The Lock of {x, y} has its first copy
// held back (go-redis resends it on a new connection, and the resend acquires); another
// client then removes y (ForceUnlock), takes it and unlocks it, and the held copy lands.
// Its token was served, and the lease no longer holds y: it takes nothing back, so the
// lease's Extend finds y lost, and y is free for others. The Mutex of y alone is the same
// story.
func TestLateMultiMutexCopyNeverTakesBackLostName(t *testing.T) {
	const ttl = 30 * time.Second
	for _, tt := range []struct {
		name string
		lock func(context.Context, *dlock.Client) (*dlock.Lease, error)
	}{
		{"multi", func(ctx context.Context, c *dlock.Client) (*dlock.Lease, error) {
			return c.MultiMutex([]string{"x", "y"}, dlock.TTL(ttl)).Lock(ctx)
		}},
		{"mutex", func(ctx context.Context, c *dlock.Client) (*dlock.Lease, error) {
			return c.Mutex("y", dlock.TTL(ttl)).Lock(ctx)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, rdb := standalone(t)
			other := newClient(t, rdb)
			a := newLateProcessRT(t, srv, 200*time.Millisecond)
			ctx := ctxTimeout(t, 20*time.Second)

			var lease *dlock.Lease
			acquisition, locked := a.hold(t, func() (err error) {
				lease, err = tt.lock(ctx, a.Client)
				return err
			})
			select {
			case err := <-locked:
				if err != nil {
					t.Fatalf("Lock with its first copy held back: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Lock did not return within 10s")
			}
			if _, err := other.ForceUnlock(ctx, "y"); err != nil {
				t.Fatalf("ForceUnlock y: %v", err)
			}
			l, err := other.Mutex("y").TryLock(ctx)
			if err != nil {
				t.Fatalf("TryLock of y, force-unlocked: %v", err)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatalf("Unlock of y: %v", err)
			}
			land(t, acquisition)
			if err := lease.Extend(ctx, ttl); !errors.Is(err, dlock.ErrNotHeld) {
				t.Errorf("Extend of the lease that lost y = %v, want ErrNotHeld (y holds %q)", err, rdb.Get(ctx, "dlock:y").Val())
			}
			l, err = other.Mutex("y").TryLock(ctx)
			if err != nil {
				t.Fatalf("y, which no lease holds, is refused: %v", err)
			}
			_ = l.Unlock(ctx)
		})
	}
}
