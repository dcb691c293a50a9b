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

// waitsForItself is the error of a Lock of r that would wait for leases its ctx carries,
// or nil: other (carried) holds r's lock key alone and r's kind waits for it
// (scheme.waitsFor), or the kind finds that the leases ctx carries keep r out
// (scheme.selfWait: a Semaphore's permits). A try does not wait: it fails as it would for
// anyone's lease.
func waitsForItself(ctx context.Context, r *request, other *Hold) error {
	t := r.t
	switch {
	case r.try:
		return nil
	case other != nil && t.scheme.waitsFor(other):
		return refusal{fmt.Errorf("dlock: lock %q: ctx carries a live %s lease on it from this Client, and this %s Lock would wait for itself: %s",
			t.name, other.t.scheme.kind(), t.scheme.kind(), selfWaitAdvice)}
	}
	return t.scheme.selfWait(ctx, r)
}

// selfWaitAdvice ends the error of a Lock refused because it would wait for a lease its
// ctx carries.
const selfWaitAdvice = "unlock that lease first, or lock with a context that does not carry it"

// LeaseFrom returns the innermost lease that ctx carries, of any Client, whether it has
// ended or not, or nil: the lease whose Context ctx is or was derived from, so that work
// run with that context can look at its own lease, also after it was lost.
func LeaseFrom(ctx context.Context) *Lease {
	if chain, _ := ctx.Value(leaseKey{}).(*leaseChain); chain != nil {
		return chain.lease
	}
	return nil
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
	outer := h.context()
	l.stop = context.AfterFunc(outer, func() { cancel(context.Cause(outer)) })
	l.ctx = withLease(ctx, lockCtx, l)
	return l
}
