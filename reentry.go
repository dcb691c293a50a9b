package dlock

import "context"

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
func heldIn(ctx context.Context, c *Client, kind, lockKey string) *hold {
	chain, _ := ctx.Value(leaseKey{}).(*leaseChain)
	for ; chain != nil; chain = chain.parent {
		h := chain.lease.h
		if h.c == c && h.t.scheme.kind() == kind && h.t.keys.Lock == lockKey && chain.lease.Err() == nil {
			return h
		}
	}
	return nil
}

// withLease returns base carrying l in front of the leases that parent carries.
func withLease(base, parent context.Context, l *Lease) context.Context {
	chain, _ := parent.Value(leaseKey{}).(*leaseChain)
	return context.WithValue(base, leaseKey{}, &leaseChain{lease: l, parent: chain})
}

// newOuterLease returns the lease that owns h. lockCtx is the ctx given to Lock: the lease
// context keeps its values, not its cancellation.
func newOuterLease(h *hold, lockCtx context.Context) *Lease {
	l := &Lease{h: h, outer: true}
	l.ctx = withLease(h.ctx, lockCtx, l)
	return l
}

// newInnerLease returns a re-entrant lease sharing h. Its context ends when it is unlocked
// or when h ends, whichever comes first, even if lockCtx no longer propagates h's end.
func newInnerLease(h *hold, lockCtx context.Context) *Lease {
	l := &Lease{h: h}
	ctx, cancel := context.WithCancelCause(context.WithoutCancel(lockCtx))
	l.cancel = cancel
	l.stop = context.AfterFunc(h.ctx, func() { cancel(context.Cause(h.ctx)) })
	l.ctx = withLease(ctx, lockCtx, l)
	return l
}
