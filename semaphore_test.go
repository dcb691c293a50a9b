package dlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// semaphoreBound has 12 clients take 1 permit of a size-3 semaphore 10 times each and
// checks that never more than 3 hold at once, and that all 120 acquisitions happen.
func semaphoreBound(t *testing.T, clients func() *dlock.Client) {
	ctx := ctxTimeout(t, 120*time.Second)
	var inside, most, total atomic.Int64
	var wg sync.WaitGroup
	for range 12 {
		sem := clients().Semaphore("pool", 3)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 10 {
				l, err := sem.Acquire(ctx, 1)
				if err != nil {
					t.Error(err)
					return
				}
				now := inside.Add(1)
				for {
					m := most.Load()
					if now <= m || most.CompareAndSwap(m, now) {
						break
					}
				}
				time.Sleep(2 * time.Millisecond)
				inside.Add(-1)
				total.Add(1)
				if err := l.Unlock(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	t.Logf("at most %d holders at once, %d acquisitions", most.Load(), total.Load())
	if most.Load() > 3 {
		t.Fatalf("%d holders of a size-3 semaphore at once", most.Load())
	}
	if total.Load() != 120 {
		t.Fatalf("%d acquisitions, want 120", total.Load())
	}
}

func TestSemaphoreBound(t *testing.T) {
	_, rdb := standalone(t)
	semaphoreBound(t, func() *dlock.Client { return newClient(t, rdb) })
}

func TestSemaphoreBoundCluster(t *testing.T) {
	rdb := redistest.StartCluster(t, 3).Client(t)
	semaphoreBound(t, func() *dlock.Client { return newClient(t, rdb) })
}

func TestSemaphoreBoundQuorum(t *testing.T) {
	_, nodes, _ := quorumOf(t, 5)
	semaphoreBound(t, func() *dlock.Client { return newQuorumClient(t, nodes) })
}

func TestSemaphoreExpiredHolderReturnsPermits(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 10*time.Second)
	dying := newClient(t, rdb).Semaphore("pool", 2, dlock.TTL(300*time.Millisecond), dlock.NoRenew())
	l, err := dying.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	other := newClient(t, rdb).Semaphore("pool", 2)
	if _, err := other.TryAcquire(ctx, 1); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire of a full semaphore = %v", err)
	}
	start := time.Now()
	got, err := other.Acquire(ctx, 2) // waits for the dead holder's TTL
	if err != nil {
		t.Fatalf("Acquire after the holder's TTL: %v", err)
	}
	t.Logf("permits came back %v after the wait began (holder TTL 300ms)", time.Since(start))
	if l.Err() != dlock.ErrLost {
		t.Fatalf("the expired holder's lease: %v", l.Err())
	}
	_ = got.Unlock(ctx)
}

func TestSemaphoreLargeRequestNotStarved(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 30*time.Second)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 3 {
		sem := newClient(t, rdb).Semaphore("pool", 3)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, err := sem.Acquire(ctx, 1)
				if err != nil {
					return
				}
				time.Sleep(5 * time.Millisecond)
				_ = l.Unlock(ctx)
			}
		}()
	}
	time.Sleep(100 * time.Millisecond)
	big, err := newClient(t, rdb).Semaphore("pool", 3).Acquire(ctx, 3)
	close(stop)
	if err != nil {
		t.Fatalf("a request for every permit starved behind small ones: %v", err)
	}
	_ = big.Unlock(ctx)
	wg.Wait()
}

func TestSemaphoreBadInput(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	tests := []struct {
		name string
		do   func() error
		want string
	}{
		{"n above size", func() error { _, err := c.Semaphore("s", 3).Acquire(ctx, 4); return err }, "ask for 1 to 3"},
		{"n zero", func() error { _, err := c.Semaphore("s", 3).TryAcquire(ctx, 0); return err }, "ask for 1 to 3"},
		{"n negative", func() error { _, err := c.Semaphore("s", 3).Acquire(ctx, -1); return err }, "ask for 1 to 3"},
		{"size zero", func() error { _, err := c.Semaphore("s", 0).Acquire(ctx, 1); return err }, "at least 1 permit"},
		{"size negative", func() error { _, err := c.Semaphore("s", -5).TryAcquire(ctx, 1); return err }, "at least 1 permit"},
		{"empty name", func() error { _, err := c.Semaphore("", 3).Acquire(ctx, 1); return err }, "empty lock name"},
		{"bad TTL", func() error { _, err := c.Semaphore("s", 3, dlock.TTL(time.Millisecond)).Acquire(ctx, 1); return err }, "too short"},
		{"wrong type", func() error {
			rdb.Set(ctx, "dlock:str", "x", 0)
			_, err := c.Semaphore("str", 3).Acquire(ctx, 1)
			return err
		}, "WRONGTYPE"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.do()
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want one saying %q", err, tt.want)
			}
		})
	}
}

// TestSemaphoreAcquireBeyondCarriedPermitsRefused: a Semaphore is not re-entrant, so an
// Acquire whose ctx carries live leases of the same Client on permits that, with the ones
// it asks for, exceed the size would wait for itself: it returns an error at once. Leases
// that leave room, ended leases and another Client's leases do not count; a try fails as
// it would for anyone's lease.
func TestSemaphoreAcquireBeyondCarriedPermitsRefused(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 30*time.Second)
	sem := c.Semaphore("nested", 3)
	outer, err := sem.Acquire(ctx, 2)
	if err != nil {
		t.Fatal(err)
	}
	inner, err := sem.Acquire(outer.Context(), 1) // 2 + 1 fit
	if err != nil {
		t.Fatalf("Acquire within the size under a lease: %v", err)
	}
	lockCtx, cancel := context.WithTimeout(inner.Context(), 5*time.Second)
	defer cancel()
	start := time.Now()
	if _, err := sem.Acquire(lockCtx, 1); err == nil || !strings.Contains(err.Error(), "would wait for itself") {
		t.Fatalf("Acquire beyond the size under its own leases = %v, want the would-wait-for-itself error", err)
	}
	if waited := time.Since(start); waited > 2*time.Second {
		t.Fatalf("the refusal took %v", waited)
	}
	if _, err := sem.TryAcquire(lockCtx, 1); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryAcquire beyond the size under its own leases = %v, want ErrNotAcquired", err)
	}
	if outer.Err() != nil || inner.Err() != nil {
		t.Fatalf("a carried lease ended: %v, %v", outer.Err(), inner.Err())
	}
	// Another Client's Acquire with the same ctx waits like anyone's: here until lockCtx ends.
	if _, err := newClient(t, rdb).Semaphore("nested", 3).Acquire(lockCtx, 1); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("another Client's Acquire = %v, want it to wait until ctx ends", err)
	}
	// An ended lease holds nothing: 1 (inner) + 2 fit once outer is unlocked.
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	again, err := sem.Acquire(inner.Context(), 2)
	if err != nil {
		t.Fatalf("Acquire after the outer lease ended: %v", err)
	}
	_ = again.Unlock(ctx)
	_ = inner.Unlock(ctx)
}
