package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
)

// doKind is one kind's Do on the lock called lock of c, and try: what another Client
// tries without waiting, which fails with ErrNotAcquired while that Do holds the lock.
type doKind struct {
	name string
	do   func(c *dlock.Client, ctx context.Context, lock string, fn func(context.Context) error) error
	try  func(c *dlock.Client, ctx context.Context, lock string) (*dlock.Lease, error)
}

var doKinds = []doKind{
	{"Mutex.Do",
		func(c *dlock.Client, ctx context.Context, lock string, fn func(context.Context) error) error {
			return c.Mutex(lock, dlock.TTL(300*time.Millisecond)).Do(ctx, fn)
		},
		func(c *dlock.Client, ctx context.Context, lock string) (*dlock.Lease, error) {
			return c.Mutex(lock).TryLock(ctx)
		}},
	{"RWMutex.Do",
		func(c *dlock.Client, ctx context.Context, lock string, fn func(context.Context) error) error {
			return c.RWMutex(lock, dlock.TTL(300*time.Millisecond)).Do(ctx, fn)
		},
		func(c *dlock.Client, ctx context.Context, lock string) (*dlock.Lease, error) {
			return c.RWMutex(lock).TryRLock(ctx)
		}},
	{"RWMutex.RDo",
		func(c *dlock.Client, ctx context.Context, lock string, fn func(context.Context) error) error {
			return c.RWMutex(lock, dlock.TTL(300*time.Millisecond)).RDo(ctx, fn)
		},
		func(c *dlock.Client, ctx context.Context, lock string) (*dlock.Lease, error) {
			return c.RWMutex(lock).TryLock(ctx)
		}},
	{"Semaphore.Do",
		func(c *dlock.Client, ctx context.Context, lock string, fn func(context.Context) error) error {
			return c.Semaphore(lock, 2, dlock.TTL(300*time.Millisecond)).Do(ctx, 2, fn)
		},
		func(c *dlock.Client, ctx context.Context, lock string) (*dlock.Lease, error) {
			return c.Semaphore(lock, 2).TryAcquire(ctx, 1)
		}},
}

// TestLeaseFromInsideDo: in every kind's Do, fn's ctx carries the lease of that Do, whose
// token is the fencing counter Redis holds, and the lock is held while fn runs and free
// after Do.
func TestLeaseFromInsideDo(t *testing.T) {
	_, rdb := standalone(t)
	c, other := newClient(t, rdb), newClient(t, rdb)
	ctx := ctxTimeout(t, 20*time.Second)
	for _, k := range doKinds {
		t.Run(k.name, func(t *testing.T) {
			var inside *dlock.Lease
			err := k.do(c, ctx, k.name, func(ctx context.Context) error {
				l, ok := dlock.LeaseFrom(ctx)
				if !ok {
					t.Fatal("LeaseFrom(fn's ctx) = false")
				}
				inside = l
				if info, err := c.Inspect(ctx, k.name); err != nil || info.Fence != l.Token() || l.Token() == 0 {
					t.Errorf("LeaseFrom's token %d, Inspect's fencing counter %+v (%v): want equal, not 0", l.Token(), info, err)
				}
				if l.Name() != k.name || l.Err() != nil {
					t.Errorf("LeaseFrom's lease: name %q, Err %v; want %q, nil", l.Name(), l.Err(), k.name)
				}
				if _, err := k.try(other, ctx, k.name); !errors.Is(err, dlock.ErrNotAcquired) {
					t.Errorf("another Client got in while fn ran: %v", err)
				}
				return nil
			})
			if err != nil {
				t.Fatalf("Do = %v", err)
			}
			if inside.Err() != dlock.ErrReleased {
				t.Errorf("after Do, the lease fn saw: Err %v, want ErrReleased", inside.Err())
			}
			l, err := k.try(other, ctx, k.name)
			if err != nil {
				t.Fatalf("after Do, the lock is still held: %v", err)
			}
			_ = l.Unlock(ctx)
		})
	}
}

type otherKey struct{}

// TestLeaseFromNested: LeaseFrom gives the innermost lease of the contexts derived from
// each other, ended or not, and nothing for a context without a lease.
func TestLeaseFromNested(t *testing.T) {
	_, rdb := standalone(t)
	c, c2 := newClient(t, rdb), newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	if l, ok := dlock.LeaseFrom(ctx); ok || l != nil {
		t.Fatalf("LeaseFrom(a ctx without a lease) = %v, %v; want nil, false", l, ok)
	}
	outer := mustLock(t, c.Mutex("outer"), ctx)
	inner := mustLock(t, c2.Mutex("inner"), outer.Context()) // another Client's lease, nested
	derived, cancel := context.WithCancel(context.WithValue(inner.Context(), otherKey{}, 1))
	defer cancel()
	for _, tc := range []struct {
		what string
		ctx  context.Context
		want *dlock.Lease
	}{
		{"outer.Context()", outer.Context(), outer},
		{"inner.Context()", inner.Context(), inner},
		{"a context derived from inner's", derived, inner},
	} {
		if got, ok := dlock.LeaseFrom(tc.ctx); got != tc.want || !ok {
			t.Errorf("LeaseFrom(%s) = %p, %v; want %p, true", tc.what, got, ok, tc.want)
		}
	}
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// Ended, it is still the lease the context carries: work learns from it why it stopped.
	if got, ok := dlock.LeaseFrom(derived); got != inner || !ok || inner.Err() != dlock.ErrReleased {
		t.Errorf("LeaseFrom(derived) after inner's Unlock = %p, %v (inner's Err %v); want inner, true, ErrReleased", got, ok, inner.Err())
	}
	if got, _ := dlock.LeaseFrom(outer.Context()); got != outer || outer.Err() != nil {
		t.Errorf("LeaseFrom(outer.Context()) = %p (outer's Err %v); want outer, live", got, outer.Err())
	}
	_ = outer.Unlock(ctx)
}

// TestDoLeaseLost: a lease removed by ForceUnlock while fn runs ends with ErrLost: fn's
// ctx is cancelled, LeaseFrom's lease reports ErrLost, during fn and after Do, and Do's
// error wraps ErrLost as well as fn's.
func TestDoLeaseLost(t *testing.T) {
	_, rdb := standalone(t)
	c, operator := newClient(t, rdb), newClient(t, rdb)
	ctx := ctxTimeout(t, 30*time.Second)
	for _, k := range doKinds {
		t.Run(k.name, func(t *testing.T) {
			testDoLost(t, ctx, k, c, func(ctx context.Context) error {
				_, err := operator.ForceUnlock(ctx, k.name)
				return err
			})
		})
	}
	t.Run("FLUSHALL", func(t *testing.T) {
		testDoLost(t, ctx, doKinds[0], c, func(ctx context.Context) error { return rdb.FlushAll(ctx).Err() })
	})
}

// testDoLost runs k's Do on c, removes its lock from Redis with remove while fn runs, and
// checks what fn and Do see.
func testDoLost(t *testing.T, ctx context.Context, k doKind, c *dlock.Client, remove func(context.Context) error) {
	t.Helper()
	boom := errors.New("fn's error")
	var inside *dlock.Lease
	err := k.do(c, ctx, k.name, func(fnCtx context.Context) error {
		var ok bool
		if inside, ok = dlock.LeaseFrom(fnCtx); !ok {
			t.Fatal("LeaseFrom(fn's ctx) = false")
		}
		if err := remove(ctx); err != nil {
			t.Errorf("removing the lock: %v", err)
		}
		select {
		case <-fnCtx.Done():
		case <-time.After(5 * time.Second):
			t.Error("fn's ctx not cancelled within 5s of the lock's removal")
		}
		if inside.Err() != dlock.ErrLost || !errors.Is(context.Cause(fnCtx), dlock.ErrLost) {
			t.Errorf("in fn: LeaseFrom's Err %v, ctx's cause %v; want ErrLost", inside.Err(), context.Cause(fnCtx))
		}
		return boom
	})
	if !errors.Is(err, dlock.ErrLost) || !errors.Is(err, boom) {
		t.Errorf("Do with its lease lost = %v, want ErrLost and fn's error", err)
	}
	if inside.Err() != dlock.ErrLost {
		t.Errorf("after Do: LeaseFrom's Err %v, want ErrLost", inside.Err())
	}
}

// TestDoUnlocksWhenFnPanicsEveryKind: as TestDoUnlocksWhenFnPanics, for the kinds besides
// the Mutex.
func TestDoUnlocksWhenFnPanicsEveryKind(t *testing.T) {
	_, rdb := standalone(t)
	c, other := newClient(t, rdb), newClient(t, rdb)
	ctx := ctxTimeout(t, 20*time.Second)
	for _, k := range doKinds[1:] {
		t.Run(k.name, func(t *testing.T) {
			func() {
				defer func() {
					if recover() == nil {
						t.Error("the panic did not go on after Do")
					}
				}()
				_ = k.do(c, ctx, k.name, func(context.Context) error { panic("boom") })
			}()
			l, err := k.try(other, ctx, k.name)
			if err != nil {
				t.Fatalf("after fn panicked in Do, the lock is still held: %v", err)
			}
			_ = l.Unlock(ctx)
		})
	}
}

// TestRWMutexRDoReadersTogether: two RDo run their fn at the same time (each waits inside
// for the other to come in), and a writer is kept out meanwhile.
func TestRWMutexRDoReadersTogether(t *testing.T) {
	_, rdb := standalone(t)
	c, other := newClient(t, rdb), newClient(t, rdb)
	ctx := ctxTimeout(t, 20*time.Second)
	rw := c.RWMutex("readers")
	in := make(chan struct{}, 2)
	reader := func(ctx context.Context) error {
		in <- struct{}{}
		deadline := time.After(5 * time.Second)
		for len(in) < 2 {
			select {
			case <-deadline:
				return errors.New("the other reader did not come in within 5s")
			case <-time.After(5 * time.Millisecond):
			}
		}
		if _, err := other.RWMutex("readers").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			return errors.New("a writer got in beside the readers")
		}
		return nil
	}
	errs := make(chan error, 2)
	for range 2 {
		go func() { errs <- rw.RDo(ctx, reader) }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	l, err := other.RWMutex("readers").TryLock(ctx)
	if err != nil {
		t.Fatalf("after both RDo, a writer cannot get in: %v", err)
	}
	_ = l.Unlock(ctx)
}

// TestSemaphoreDoTakesN: Do holds n permits while fn runs, and refuses an n out of range
// without running fn.
func TestSemaphoreDoTakesN(t *testing.T) {
	_, rdb := standalone(t)
	c, other := newClient(t, rdb), newClient(t, rdb)
	ctx := ctxTimeout(t, 20*time.Second)
	s := c.Semaphore("pool", 3)
	err := s.Do(ctx, 2, func(ctx context.Context) error {
		info, err := c.Inspect(ctx, "pool")
		if err != nil || len(info.Holders) != 1 || info.Holders[0].Permits != 2 {
			t.Errorf("Inspect in fn = %+v, %v; want one holder of 2 permits", info, err)
		}
		if _, err := other.Semaphore("pool", 3).TryAcquire(ctx, 2); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Errorf("TryAcquire(2) beside Do(2) of 3 = %v, want ErrNotAcquired", err)
		}
		l, err := other.Semaphore("pool", 3).TryAcquire(ctx, 1)
		if err != nil {
			t.Errorf("TryAcquire(1) beside Do(2) of 3 = %v", err)
		} else {
			_ = l.Unlock(ctx)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do = %v", err)
	}
	for _, n := range []int64{0, 4} {
		if err := s.Do(ctx, n, func(context.Context) error { t.Errorf("Do(%d) ran fn", n); return nil }); err == nil {
			t.Errorf("Do(%d) of 3 = nil, want an error", n)
		}
	}
	l, err := other.Semaphore("pool", 3).TryAcquire(ctx, 3)
	if err != nil {
		t.Fatalf("after Do, the permits are not all back: %v", err)
	}
	_ = l.Unlock(ctx)
}

// TestLeaseFromQuorum: on a quorum of 3 servers, fn's ctx carries the lease of its Do,
// with the largest fencing counter of the nodes as its token, and a ForceUnlock on every
// node while fn runs ends it with ErrLost.
func TestLeaseFromQuorum(t *testing.T) {
	_, nodes, c := quorumOf(t, 3)
	ctx := ctxTimeout(t, 20*time.Second)
	err := c.Mutex("q").Do(ctx, func(ctx context.Context) error {
		l, ok := dlock.LeaseFrom(ctx)
		if !ok || l.Err() != nil {
			t.Fatalf("LeaseFrom in a quorum Do = %v, %v", l, ok)
		}
		if info, err := c.Inspect(ctx, "q"); err != nil || info.Fence != l.Token() || l.Token() == 0 {
			t.Errorf("LeaseFrom's token %d, Inspect's fencing counter %+v (%v): want equal, not 0", l.Token(), info, err)
		}
		return nil
	})
	if err != nil {
		t.Fatalf("Do = %v", err)
	}
	k := doKinds[0]
	testDoLost(t, ctx, k, c, func(ctx context.Context) error {
		_, err := c.ForceUnlock(ctx, k.name)
		return err
	})
	if n, err := nodes[0].Exists(ctx, keysOf(k.name).Lock).Result(); err != nil || n != 0 {
		t.Errorf("after Do, the lock key is on node 0: %d, %v", n, err)
	}
}
