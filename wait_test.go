package dlock_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// These tests measure how long a waiter takes to notice that a lock became free, against
// a 30 s lease: a waiter that woke by polling or by expiry would take seconds, one that
// was told takes about a round trip. The bounds are a tenth of the lease, so that a slow
// machine does not fail them; the measured figures are logged.

const longTTL = 30 * time.Second

func TestWakeOnUnlock(t *testing.T) {
	_, rdb := standalone(t)
	holder, waiter := newClient(t, rdb), newClient(t, rdb)
	ctx := ctxTimeout(t, 20*time.Second)
	l := mustLock(t, holder.Mutex("wake", dlock.TTL(longTTL)), ctx)
	got := acquiredAt(t, ctx, waiter.Mutex("wake").Lock)
	time.Sleep(200 * time.Millisecond) // let the waiter subscribe and settle
	before := scriptCalls(t, rdb)
	released := time.Now()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	woke := (<-got).Sub(released)
	t.Logf("waiter acquired %v after Unlock", woke)
	if woke > longTTL/10 {
		t.Fatalf("waiter took %v after Unlock", woke)
	}
	if calls := scriptCalls(t, rdb) - before; calls > 4 {
		t.Fatalf("%d requests between Unlock and the waiter's acquisition: it polls", calls)
	}
}

func TestWakeOnForeignDelete(t *testing.T) {
	// Keyspace events, where the server publishes them, wake a waiter too: an accelerator
	// beside CLIENT TRACKING (foreign_test.go shows a server without them).
	_, rdb := standalone(t, redistest.WithArgs("--notify-keyspace-events", "Kgx"))
	c := newClient(t, rdb, dlock.WithPrefix(""))
	ctx := ctxTimeout(t, 20*time.Second)
	if err := rdb.Set(ctx, "bare-key", "other-library-token", longTTL).Err(); err != nil {
		t.Fatal(err)
	}
	got := acquiredAt(t, ctx, c.Mutex("bare-key").Lock)
	time.Sleep(200 * time.Millisecond)
	deleted := time.Now()
	rdb.Del(ctx, "bare-key")
	woke := (<-got).Sub(deleted)
	t.Logf("waiter acquired %v after a foreign DEL", woke)
	if woke > longTTL/10 {
		t.Fatalf("waiter took %v after a foreign DEL", woke)
	}
}

func TestWakeOnForeignExpiry(t *testing.T) {
	// No keyspace events: the acquire script's reply (the holder's remaining time) is
	// what wakes the waiter, without polling in between.
	_, rdb := standalone(t)
	c := named(t, newClient(t, rdb, dlock.WithPrefix("")))
	ctx := ctxTimeout(t, 20*time.Second)
	expiry := 1500 * time.Millisecond
	rdb.Set(ctx, "expiring", "other-library-token", expiry)
	set := time.Now()
	before := scriptCalls(t, rdb)
	l := mustLock(t, c.Mutex("expiring"), ctx)
	took := time.Since(set)
	calls := scriptCalls(t, rdb) - before
	t.Logf("acquired %v after a %v foreign key was set, in %d requests", took, expiry, calls)
	if took < expiry-50*time.Millisecond {
		t.Fatalf("acquired after %v, before the foreign key expired", took)
	}
	if took > expiry+longTTL/10 {
		t.Fatalf("acquired %v after the foreign key expired", took-expiry)
	}
	if calls > 4 {
		t.Fatalf("%d requests while waiting %v: the waiter polls", calls, expiry)
	}
	_ = l.Unlock(ctx)
}

func TestLockGivesUpWithContext(t *testing.T) {
	_, rdb := standalone(t)
	holder, waiter := newClient(t, rdb), newClient(t, rdb)
	l := mustLock(t, holder.Mutex("busy"), ctxTimeout(t, 10*time.Second))
	defer l.Unlock(context.Background())
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := waiter.Mutex("busy").Lock(ctx)
	took := time.Since(start)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock = %v, want DeadlineExceeded", err)
	}
	t.Logf("gave up after %v: %v", took, err)
	if took > 300*time.Millisecond+longTTL/10 {
		t.Fatalf("gave up %v after its deadline", took-300*time.Millisecond)
	}
	if _, err := waiter.Mutex("busy").Lock(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with an ended ctx = %v", err)
	}
}

func TestLocalWaitersQueue(t *testing.T) {
	// Eight goroutines of one process wait for a lock held elsewhere: only the head asks
	// Redis, and they are served in arrival order.
	_, rdb := standalone(t)
	holder, waiters := newClient(t, rdb), newClient(t, rdb)
	ctx := ctxTimeout(t, 30*time.Second)
	l := mustLock(t, holder.Mutex("queued", dlock.TTL(longTTL)), ctx)
	var mu sync.Mutex
	var order []int
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := waiters.Mutex("queued").Lock(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			mu.Unlock()
			_ = w.Unlock(ctx)
		}()
		time.Sleep(20 * time.Millisecond) // arrival order
	}
	time.Sleep(100 * time.Millisecond)
	before := scriptCalls(t, rdb)
	time.Sleep(time.Second)
	if calls := scriptCalls(t, rdb) - before; calls > 1 {
		t.Fatalf("%d requests in a second from 8 waiters on a held lock", calls)
	}
	_ = l.Unlock(ctx)
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("served in order %v, want arrival order", order)
		}
	}
}
