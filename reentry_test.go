package dlock_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
)

// lockKinds are the locks that take a name's lock key, by the Kind their events carry.
var lockKinds = []struct {
	kind string
	lock func(c *dlock.Client, name string, ctx context.Context) (*dlock.Lease, error)
}{
	{dlock.KindMutex, func(c *dlock.Client, name string, ctx context.Context) (*dlock.Lease, error) {
		return c.Mutex(name).Lock(ctx)
	}},
	{dlock.KindFair, func(c *dlock.Client, name string, ctx context.Context) (*dlock.Lease, error) {
		return c.FairMutex(name).Lock(ctx)
	}},
	{dlock.KindRead, func(c *dlock.Client, name string, ctx context.Context) (*dlock.Lease, error) {
		return c.RWMutex(name).RLock(ctx)
	}},
	{dlock.KindWrite, func(c *dlock.Client, name string, ctx context.Context) (*dlock.Lease, error) {
		return c.RWMutex(name).Lock(ctx)
	}},
	{dlock.KindTimestamp, func(c *dlock.Client, name string, ctx context.Context) (*dlock.Lease, error) {
		return c.TimestampMutex(name).Lock(ctx)
	}},
	{dlock.KindMulti, func(c *dlock.Client, name string, ctx context.Context) (*dlock.Lease, error) {
		return c.MultiMutex([]string{name, name + ":other"}).Lock(ctx)
	}},
	{dlock.KindSemaphore, func(c *dlock.Client, name string, ctx context.Context) (*dlock.Lease, error) {
		return c.Semaphore(name, 2).Acquire(ctx, 1)
	}},
}

// TestLockOfAnotherKindHeldInCtxRefused: a Lock whose ctx carries a live lease of the same
// Client that holds the name alone, by another kind of lock, would wait for itself; it
// returns an error at once and leaves the lease held. A lease of the same kind is
// re-entered, and a write lease gives way to a read lock (downgrade). Kinds that fail at
// once on a key of another kind (a Semaphore, a TimestampMutex that does not queue behind
// the lease in this process) keep their own errors, and a MultiMutex TryLock is refused
// as not acquired.
func TestLockOfAnotherKindHeldInCtxRefused(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 60*time.Second)
	for _, held := range lockKinds {
		if held.kind == dlock.KindRead || held.kind == dlock.KindSemaphore { // they hold nothing alone
			continue
		}
		for _, next := range lockKinds {
			t.Run(held.kind+"/"+next.kind, func(t *testing.T) {
				name := "self:" + held.kind + ":" + next.kind
				outer, err := held.lock(c, name, ctx)
				if err != nil {
					t.Fatal(err)
				}
				defer func() { _ = outer.Unlock(ctx) }()
				lockCtx, cancel := context.WithTimeout(outer.Context(), 5*time.Second)
				defer cancel()
				start := time.Now()
				inner, err := next.lock(c, name, lockCtx)
				switch {
				case held.kind == next.kind && next.kind != dlock.KindMulti:
					if err != nil || inner.Token() != outer.Token() {
						t.Fatalf("re-entry = %v, %v", inner, err)
					}
					_ = inner.Unlock(ctx)
				case held.kind == dlock.KindWrite && next.kind == dlock.KindRead:
					if err != nil {
						t.Fatalf("downgrade = %v", err)
					}
					_ = inner.Unlock(ctx)
				case next.kind == dlock.KindSemaphore:
					if err == nil || !strings.Contains(err.Error(), "WRONGTYPE") {
						t.Fatalf("Acquire = %v, want the key's wrong type", err)
					}
				case next.kind == dlock.KindTimestamp && (held.kind == dlock.KindFair || held.kind == dlock.KindMulti):
					if !errors.Is(err, dlock.ErrNotTimestamp) {
						t.Fatalf("Lock = %v, want ErrNotTimestamp", err)
					}
				default:
					if err == nil {
						_ = inner.Unlock(ctx)
						t.Fatal("Lock with a lease of another kind on the name in ctx succeeded")
					}
					if errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "would wait for itself") {
						t.Fatalf("Lock = %v, want the would-wait-for-itself error", err)
					}
					if next.kind == dlock.KindMulti {
						m := c.MultiMutex([]string{name, name + ":other"})
						if _, err := m.TryLock(lockCtx); !errors.Is(err, dlock.ErrNotAcquired) {
							t.Fatalf("MultiMutex.TryLock = %v, want ErrNotAcquired", err)
						}
					}
				}
				if waited := time.Since(start); waited > 2*time.Second {
					t.Fatalf("Lock took %v", waited)
				}
				if outer.Err() != nil {
					t.Fatalf("the outer lease ended: %v", outer.Err())
				}
			})
		}
	}
}
