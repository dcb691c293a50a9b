package dlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestHandOffKeepsWaitersOptions: a waiter that locked a handle with other options than
// the releaser's (here: renewing, after a NoRenew holder) gets a lease of its own options,
// not the releaser's hold (which would end at the inherited deadline, unrenewed).
func TestHandOffKeepsWaitersOptions(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	c := newClient(t, rdb)
	noRenew := c.Mutex("opts", dlock.TTL(600*time.Millisecond), dlock.NoRenew())
	renewing := c.Mutex("opts", dlock.TTL(600*time.Millisecond))

	blocker := mustLock(t, renewing, ctx)
	lockIn := func(m *dlock.Mutex, out chan<- *dlock.Lease) {
		go func() {
			l, err := m.Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			out <- l
		}()
	}
	a, b := make(chan *dlock.Lease, 1), make(chan *dlock.Lease, 1)
	lockIn(noRenew, a)
	waitFor(t, 5*time.Second, "A to queue", func() bool { return dlock.LocalWaiters(renewing) == 1 })
	lockIn(renewing, b)
	waitFor(t, 5*time.Second, "B to queue", func() bool { return dlock.LocalWaiters(renewing) == 2 })
	_ = blocker.Unlock(ctx) // no spare token: through Redis; A acquires reserving one for B
	la := <-a
	if la == nil {
		t.FailNow()
	}
	_ = la.Unlock(ctx) // hands the hold to B, no round trip
	lb := <-b
	if lb == nil {
		t.FailNow()
	}
	start := time.Now()
	select {
	case <-lb.Done():
		t.Errorf("B locked a renewing Mutex (TTL 600ms) and was handed A's NoRenew hold: its lease ended after %v: %v",
			time.Since(start).Round(time.Millisecond), context.Cause(lb.Context()))
	case <-time.After(1500 * time.Millisecond):
	}
	_ = lb.Unlock(ctx)
}

// TestHandOffAfterConcurrentShorteningExtend: Extend (shortening) and Unlock on the
// same lease at once, with the server stalled. Were Unlock to hand the hold to a local
// waiter while the Extend is in flight, its PEXPIRE would land after the hand-off, whose
// successor would claim the old deadline long after the key expired, while another
// process takes the lock. The successor's lease must never be valid beside another's.
func TestHandOffAfterConcurrentShorteningExtend(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--enable-debug-command", "yes"))
	rdb := srv.Client(t)
	ctx := ctxTimeout(t, 20*time.Second)

	c := newClient(t, rdb)
	m := c.Mutex("ext", dlock.TTL(10*time.Second))
	blocker := mustLock(t, m, ctx)
	got := make(chan *dlock.Lease, 2)
	for i := range 2 {
		go func() {
			l, err := m.Lock(ctx)
			if err != nil {
				t.Error(err)
			}
			got <- l
		}()
		waitFor(t, 5*time.Second, "waiters", func() bool { return dlock.LocalWaiters(m) == i+1 })
	}
	_ = blocker.Unlock(ctx) // through Redis: first acquires, reserving a token for second
	first := <-got

	// Stall the server so that the Extend is still in flight when Unlock runs.
	stall := srv.Client(t)
	go func() { stall.Do(context.Background(), "DEBUG", "SLEEP", "0.2") }()
	time.Sleep(30 * time.Millisecond)
	extended := make(chan error, 1)
	go func() { extended <- first.Extend(ctx, 100*time.Millisecond) }()
	time.Sleep(20 * time.Millisecond)
	if err := first.Unlock(ctx); err != nil { // hands the hold to second, no round trip
		t.Fatal(err)
	}
	second := <-got
	t.Logf("Extend: %v", <-extended)
	time.Sleep(400 * time.Millisecond) // the stall ends, the PEXPIRE 100ms runs, the key expires
	t.Logf("lock key exists: %d", rdb.Exists(ctx, "dlock:ext").Val())

	if rdb.Exists(ctx, "dlock:ext").Val() == 1 {
		// The key is still held (by second, through Redis): no hand-off happened.
		_ = second.Unlock(ctx)
		return
	}
	other, err := newClient(t, rdb).Mutex("ext").TryLock(ctx) // a second process
	if err != nil {
		t.Fatalf("the key is gone but the other process could not take the lock: %v", err)
	}
	defer other.Unlock(ctx)
	if second.Err() == nil && time.Now().Before(second.ValidUntil()) {
		t.Errorf("two leases valid at once: the handed-over lease (token %d) is valid for %v more, and another process holds the lock with token %d",
			second.Token(), time.Until(second.ValidUntil()).Round(time.Millisecond), other.Token())
	}
	_ = second.Unlock(ctx)
}
