package engine

import (
	"context"
	"fmt"
	"iter"
	"slices"
	"time"
)

// Re-entry is by context: a lease's Context carries the lease, and a Lock whose ctx
// carries a live lease of the same lock of the same Client joins that lease's hold instead
// of asking Redis. Leases nest, so the context value is a chain: the lease of the innermost
// Lock first, then the leases of the contexts it was derived from.

type leaseKey struct{}

type leaseChain struct {
	lease  *Lease
	parent *leaseChain
}

// heldIn returns the live hold of (c, kind, lock key) that ctx carries, or nil.
func heldIn(ctx context.Context, c *Client, kind, lockKey string) *Hold {
	same, _ := carried(ctx, c, kind, lockKey)
	return same
}

// liveHolds yields the holds of c's live leases that ctx carries, innermost first.
func liveHolds(ctx context.Context, c *Client) iter.Seq[*Hold] {
	return func(yield func(*Hold) bool) {
		chain, _ := ctx.Value(leaseKey{}).(*leaseChain)
		for ; chain != nil; chain = chain.parent {
			if h := chain.lease.h; h.c == c && chain.lease.Err() == nil && !yield(h) {
				return
			}
		}
	}
}

// carried returns the live holds of c that ctx carries on lockKey: same, of kind (the
// hold a re-entrant Lock joins), or else other, of another kind that holds lockKey alone
// (a Lock of kind would wait for other to end, which it cannot while its caller waits).
func carried(ctx context.Context, c *Client, kind, lockKey string) (same, other *Hold) {
	for h := range liveHolds(ctx, c) {
		switch {
		case h.t.scheme.kind() == kind && h.t.keys.Lock == lockKey:
			return h, nil
		case other == nil && slices.Contains(h.t.scheme.exclusive(h.t), lockKey):
			other = h
		}
	}
	return nil, other
}

// waitsFor reports whether a Lock of r would wait for other, a hold of another kind on
// r's lock key (carried). A Semaphore finds that key of another type, and a
// TimestampMutex finds that it holds no deadline (ErrNotTimestamp): both fail at once,
// unless the TimestampMutex queues behind other in this process first (the local queue is
// by lock key: queue.go). An RLock under its RWMutex's write lease downgrades.
func waitsFor(r *request, other *Hold) bool {
	switch r.t.scheme.kind() {
	case KindSemaphore:
		return false
	case KindTimestamp:
		return other.t.share.queues()
	case KindRead:
		return other.t.scheme.kind() != KindWrite
	}
	return true
}

// waitsForItself is the error of a Lock of r that would wait for leases its ctx carries,
// or nil: other (carried) holds r's lock key alone and r waits for it (waitsFor), or the
// permits of r's semaphore that they hold leave too few for r (a Semaphore is not
// re-entrant). A try does not wait: it fails as it would for anyone's lease.
func waitsForItself(ctx context.Context, r *request, other *Hold) error {
	t := r.t
	switch {
	case r.try:
		return nil
	case other != nil && waitsFor(r, other):
		return fmt.Errorf("dlock: lock %q: ctx carries a live %s lease on it from this Client, and this %s Lock would wait for itself: %s",
			t.name, other.t.scheme.kind(), t.scheme.kind(), selfWaitAdvice)
	}
	if s, ok := t.scheme.(*semaphoreScheme); ok {
		if held := heldPermits(ctx, t); held+r.n > s.size {
			return fmt.Errorf("dlock: semaphore %q: ctx carries live leases of this Client on %d of its %d permits, and this Acquire of %d would wait for itself: unlock them first, or acquire with a context that does not carry them",
				t.name, held, s.size, r.n)
		}
	}
	return nil
}

// selfWaitAdvice ends the error of a Lock refused because it would wait for a lease its
// ctx carries.
const selfWaitAdvice = "unlock that lease first, or lock with a context that does not carry it"

// heldPermits is how many permits of the semaphore t the live leases of t's Client that
// ctx carries hold.
func heldPermits(ctx context.Context, t *Target) (n int64) {
	for h := range liveHolds(ctx, t.c) {
		if h.t.scheme.kind() == KindSemaphore && h.t.keys.Lock == t.keys.Lock {
			n += h.permits
		}
	}
	return n
}

// withLease returns base carrying l in front of the leases that parent carries.
func withLease(base, parent context.Context, l *Lease) context.Context {
	chain, _ := parent.Value(leaseKey{}).(*leaseChain)
	return context.WithValue(base, leaseKey{}, &leaseChain{lease: l, parent: chain})
}

// leaseValues is the parent of an outer lease's context: the values of the ctx given to
// Lock, without its deadline or cancellation (as context.WithoutCancel), and the lease in
// front of the leases that ctx carries. It lives inside the hold, so that a hold, its
// lease and the lease's context values take one allocation.
type leaseValues struct {
	lock  context.Context
	chain leaseChain
}

func (*leaseValues) Deadline() (time.Time, bool) { return time.Time{}, false }
func (*leaseValues) Done() <-chan struct{}       { return nil }
func (*leaseValues) Err() error                  { return nil }

func (v *leaseValues) Value(key any) any {
	if key == (leaseKey{}) {
		return &v.chain
	}
	return v.lock.Value(key)
}

// newInnerLease returns a re-entrant lease sharing h. Its context ends when it is unlocked
// or when h ends, whichever comes first, even if lockCtx no longer propagates h's end.
func newInnerLease(h *Hold, lockCtx context.Context) *Lease {
	l := &Lease{h: h}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(lockCtx))
	l.cancel = cancel
	l.stop = context.AfterFunc(h.ctx, func() { cancel(context.Cause(h.ctx)) })
	l.ctx = withLease(ctx, lockCtx, l)
	return l
}
