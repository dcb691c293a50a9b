package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

func TestRenewalKeepsShortLeaseHeld(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 20*time.Second)
	l := mustLock(t, c.Mutex("renewed", dlock.TTL(time.Second)), ctx)
	first := l.ValidUntil()
	time.Sleep(3 * time.Second)
	if l.Err() != nil {
		t.Fatalf("a renewed 1s lease ended after 3s: %v", l.Err())
	}
	if !l.ValidUntil().After(first.Add(time.Second)) {
		t.Fatalf("ValidUntil did not move: %v then %v", first, l.ValidUntil())
	}
	if pttl, _ := rdb.PTTL(ctx, "dlock:renewed").Result(); pttl <= 0 {
		t.Fatalf("the key's TTL is %v", pttl)
	}
	if _, err := newClient(t, rdb).Mutex("renewed").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("another client took a renewed lock: %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestNoRenewEndsAtDeadline(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	l := mustLock(t, c.Mutex("once", dlock.TTL(300*time.Millisecond), dlock.NoRenew()), ctx)
	valid := l.ValidUntil()
	waitClosed(t, l.Done(), 5*time.Second, "Done of a NoRenew lease")
	if now := time.Now(); now.Before(valid) {
		t.Fatalf("lease ended %v before its ValidUntil", valid.Sub(now))
	}
	if l.Err() != dlock.ErrLost {
		t.Fatalf("Err = %v, want ErrLost", l.Err())
	}
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock after the deadline = %v, want ErrNotHeld", err)
	}
}

func TestExtendMovesDeadline(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	l := mustLock(t, c.Mutex("extend", dlock.TTL(300*time.Millisecond), dlock.NoRenew()), ctx)
	before := l.ValidUntil()
	if err := l.Extend(ctx, 2*time.Second); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if !l.ValidUntil().After(before.Add(time.Second)) {
		t.Fatalf("ValidUntil moved from %v to %v", before, l.ValidUntil())
	}
	if pttl, _ := rdb.PTTL(ctx, "dlock:extend").Result(); pttl < time.Second {
		t.Fatalf("key TTL after Extend(2s) = %v", pttl)
	}
	time.Sleep(500 * time.Millisecond) // past the original deadline
	if l.Err() != nil {
		t.Fatalf("extended lease ended at its old deadline: %v", l.Err())
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestLossWhenKeyDeleted(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 20*time.Second)
	ttl := 3 * time.Second
	l := mustLock(t, c.Mutex("flushed", dlock.TTL(ttl)), ctx)
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	flushed := time.Now()
	deadline := l.ValidUntil()
	waitClosed(t, l.Done(), 10*time.Second, "Done after FLUSHALL")
	took := time.Since(flushed)
	t.Logf("loss noticed %v after FLUSHALL (renewal interval %v)", took, ttl/3)
	// Noticed by the next renewal, not by the deadline: well before ValidUntil.
	if !time.Now().Before(deadline.Add(-ttl / 6)) {
		t.Fatalf("loss noticed %v after FLUSHALL, at the deadline rather than at the next renewal", took)
	}
	if l.Err() != dlock.ErrLost || !errors.Is(context.Cause(l.Context()), dlock.ErrLost) {
		t.Fatalf("Err = %v, cause %v; want ErrLost", l.Err(), context.Cause(l.Context()))
	}
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Unlock after loss = %v, want ErrNotHeld wrapping ErrLost", err)
	}
}

func TestLossWhenServerHangs(t *testing.T) {
	srv, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	l := mustLock(t, c.Mutex("hung", dlock.TTL(time.Second)), ctx)
	srv.Pause(t)
	valid := l.ValidUntil()
	waitClosed(t, l.Done(), 5*time.Second, "Done while the server hangs")
	now := time.Now()
	if now.Before(valid) {
		t.Fatalf("lease ended %v before ValidUntil", valid.Sub(now))
	}
	if l.Err() != dlock.ErrLost || l.Context().Err() == nil {
		t.Fatalf("Err = %v, ctx err %v", l.Err(), l.Context().Err())
	}
	t.Logf("lost %v after ValidUntil", now.Sub(valid))
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock after loss = %v, want ErrNotHeld", err)
	}
	srv.Resume(t)
}

func TestUnlockFindsKeyTaken(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	l := mustLock(t, c.Mutex("taken"), ctx)
	rdb.Set(ctx, "dlock:taken", "someone-else", time.Minute)
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Unlock of a taken key = %v, want ErrNotHeld", err)
	}
	if v, _ := rdb.Get(ctx, "dlock:taken").Result(); v != "someone-else" {
		t.Fatalf("Unlock deleted another holder's key (%q)", v)
	}
	if l.Err() != dlock.ErrLost {
		t.Fatalf("Err = %v, want ErrLost", l.Err())
	}
}

// wireCounter counts the round trips on the connections its Dialer makes: a run of writes
// followed by a read is one, whatever go-redis does above the socket.
type wireCounter struct{ roundTrips atomic.Int64 }

func (w *wireCounter) dialer(opts *redis.Options) func(ctx context.Context, network, addr string) (net.Conn, error) {
	d := &net.Dialer{Timeout: opts.DialTimeout}
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, w: w}, nil
	}
}

type countingConn struct {
	net.Conn
	w     *wireCounter
	wrote atomic.Bool // written since the last read
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.wrote.Store(true)
	return c.Conn.Write(p)
}

func (c *countingConn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.wrote.Swap(false) {
		c.w.roundTrips.Add(1)
	}
	return n, err
}

// evalshaCalls is how many EVALSHA the server has run, from INFO commandstats.
func evalshaCalls(t *testing.T, rdb *redis.Client) int64 {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		if rest, ok := strings.CutPrefix(line, "cmdstat_evalsha:calls="); ok {
			n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
			return n
		}
	}
	return 0
}

func TestRenewalIsBatched(t *testing.T) {
	srv := redistest.Start(t)
	counter := &wireCounter{}
	opts := srv.Options()
	opts.Dialer = counter.dialer(opts)
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	stats := srv.Client(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 60*time.Second)
	const leases = 1000
	ttl := 900 * time.Millisecond
	held := make([]*dlock.Lease, 0, leases)
	for i := range leases {
		l, err := c.Mutex(fmt.Sprintf("many:%d", i), dlock.TTL(ttl)).TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, l)
	}
	goroutines := runtime.NumGoroutine()
	before := evalshaCalls(t, stats)
	counter.roundTrips.Store(0)
	hold := 3 * time.Second // about 10 renewal intervals of TTL/3
	time.Sleep(hold)
	roundTrips, commands := counter.roundTrips.Load(), evalshaCalls(t, stats)-before
	t.Logf("%d leases held %v: %d renewals in %d round trips; goroutines %d then %d",
		leases, hold, commands, roundTrips, goroutines, runtime.NumGoroutine())
	for _, l := range held {
		if l.Err() != nil {
			t.Fatalf("a lease ended: %v", l.Err())
		}
	}
	if commands < leases*int64(hold/(ttl/3))/2 {
		t.Fatalf("only %d renewals of %d leases in %v", commands, leases, hold)
	}
	// One round trip per tick: acquired over a short time, the leases fall due together.
	if ticks := int64(hold / (ttl / 6)); roundTrips > 2*ticks {
		t.Fatalf("%d round trips in %v: renewal is not batched (at most %d ticks)", roundTrips, hold, ticks)
	}
	if g := runtime.NumGoroutine(); g > goroutines+10 {
		t.Fatalf("goroutines grew from %d to %d while renewing", goroutines, g)
	}
	for _, l := range held {
		_ = l.Unlock(ctx)
	}
}

// An Extend to a shorter TTL that times out here but lands on the server must not leave
// the lease believing in its old, longer deadline.
func TestFailedShorterExtendShortensDeadline(t *testing.T) {
	srv, rdb := standalone(t)
	p, via := behindProxy(t, srv, redis.Options{})
	c := newClient(t, via)
	ctx := ctxTimeout(t, 10*time.Second)
	l := mustLock(t, c.Mutex("ext"), ctx) // TTL 30s
	p.SetLatency(t, 100*time.Millisecond)
	ectx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if err := l.Extend(ectx, 200*time.Millisecond); err == nil {
		t.Fatal("Extend through 100ms of latency with a 30ms ctx succeeded")
	}
	time.Sleep(500 * time.Millisecond)
	if l2, err := newClient(t, rdb).Mutex("ext").TryLock(ctx); err == nil {
		if l.Err() == nil && time.Now().Before(l.ValidUntil()) {
			t.Fatalf("two live leases: the first valid for %v more, the second has token %d", time.Until(l.ValidUntil()), l2.Token())
		}
	}
}

func TestInnerExtendAfterUnlock(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	m := c.Mutex("in")
	outer := mustLock(t, m, ctx)
	inner := mustLock(t, m, outer.Context())
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	err := inner.Extend(ctx, time.Second)
	if !errors.Is(err, dlock.ErrNotHeld) || errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Extend of an unlocked inner lease = %v, want ErrNotHeld (released, not lost)", err)
	}
	_ = outer.Unlock(ctx)
}

// TestLeaseContextAskedAfterEnd: a lease's context, first asked for once the lease has
// ended (unlocked, or lost and noticed by a renewal), is done already, with the end as
// its cause; asked for by many goroutines while the lease ends, it is one context, which
// ends once.
func TestLeaseContextAskedAfterEnd(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 20*time.Second)
	for _, tc := range []struct {
		name string
		end  func(l *dlock.Lease)
		want error
	}{
		{"unlocked", func(l *dlock.Lease) { _ = l.Unlock(ctx) }, dlock.ErrReleased},
		{"lost", func(l *dlock.Lease) {
			_ = rdb.Del(ctx, "dlock:ctx-lost").Err()
			waitFor(t, 10*time.Second, "the renewal to notice the loss", func() bool { return l.Err() != nil })
		}, dlock.ErrLost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := mustLock(t, c.Mutex("ctx-"+tc.name, dlock.TTL(time.Second)), ctx)
			tc.end(l)
			waitClosed(t, l.Done(), time.Second, "Done of an ended lease")
			if got := context.Cause(l.Context()); !errors.Is(got, tc.want) {
				t.Fatalf("cause = %v, want %v", got, tc.want)
			}
		})
	}
	t.Run("asked while it ends", func(t *testing.T) {
		l := mustLock(t, c.Mutex("ctx-racing"), ctx)
		got := make(chan context.Context, 8)
		for range cap(got) {
			go func() { got <- l.Context() }()
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		first := <-got
		for range cap(got) - 1 {
			if <-got != first {
				t.Fatal("the lease has two contexts")
			}
		}
		waitClosed(t, first.Done(), time.Second, "Done of the unlocked lease")
		if !errors.Is(context.Cause(first), dlock.ErrReleased) {
			t.Fatalf("cause = %v, want ErrReleased", context.Cause(first))
		}
	})
}
