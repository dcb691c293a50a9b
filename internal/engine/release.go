package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/quorum"
)

// release ends the hold by Unlock: compare-and-delete on every node, which also wakes the
// waiters. It succeeds if a majority released the key or no longer had it, at least one
// of them released it. The hold has ended when release returns, whatever the result.
func (h *Hold) release(ctx context.Context) error {
	h.mu.Lock()
	switch {
	case h.err == nil && !time.Now().Before(h.deadline):
		h.mu.Unlock()
		h.end(ErrLost, "its deadline passed without a successful renewal")
		return h.endedError("unlock")
	case h.err != nil:
		h.mu.Unlock()
		return h.endedError("unlock")
	case h.releasing:
		h.mu.Unlock()
		return fmt.Errorf("dlock: unlock %q: %w (another Unlock of this lease is in progress)", h.t.name, ErrNotHeld)
	}
	h.releasing = true
	ttl, extending := h.ttl, h.extending > 0
	h.mu.Unlock()
	// An Extend in flight may shorten the key's expiry after the hand-off, which the
	// successor would not hear of: release through Redis instead.
	// Back to the coordinator: the next local waiter takes the hold without a round trip.
	if !extending && h.t.coord.handOff(h) {
		return nil
	}

	c := h.c
	// The per-node timeout follows the lock's TTL option, not a length an Extend set: a
	// lease shortened to expire soon is still worth releasing on a slow server.
	wait := max(ttl, h.t.cfg.TTL)
	if ctx.Err() != nil {
		// An Unlock deferred with a context that has ended since (a request's, say) still
		// releases: leaving the key to expire would keep everyone out for a whole TTL.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), c.nodeTimeout(wait))
		defer cancel()
	}
	n, need := len(c.nodes), h.t.scheme.need(len(c.nodes))
	v := c.poll(ctx, nil, wait,
		func(call *batch.Call) { h.t.scheme.release(h.t, h.token, c.nodes[call.Node].PublishCommand(), call) },
		func(v *votes) bool { return v.yes+v.no == n || (v.yes > 0 && v.yes+v.no >= need) || v.no > n-need })
	released, gone := v.yes, v.no
	switch {
	case released > 0 && released+gone >= need:
		h.end(ErrReleased, "unlocked")
		return nil
	case gone >= need:
		h.end(ErrLost, "the key no longer held its token when Unlock ran (expired, deleted or taken)")
		return h.endedError("unlock")
	}
	h.end(ErrReleased, "unlock failed; the key expires by itself")
	err := c.pub.Error(Shortfall{Op: "unlock", Name: h.t.name, Agreed: released + gone, Needed: need, Total: n, Nodes: v.problems(c)})
	return fmt.Errorf("%w; the lease has ended here and its key expires by itself within %v", err, ttl)
}

// extend sets the lease to last ttl from now on a majority, and ttl as the length of later
// renewals. An Extend that lengthens leaves the hold unchanged on failure; one that
// shortens takes effect when it is sent, since it may land whatever the reply: the
// deadline moves down and later renewals use ttl, even if it fails. Either way, a majority
// that says the key is no longer ours ends the hold.
func (h *Hold) extend(ctx context.Context, ttl time.Duration) error {
	c := h.c
	n, need := len(c.nodes), h.t.scheme.need(len(c.nodes))
	ttlArg := ms(ttl.Milliseconds())
	seq, shorten, belief, err := h.startExtend(ttl)
	if err != nil {
		return err
	}
	defer h.endExtend(shorten)
	v := c.poll(ctx, nil, ttl,
		func(call *batch.Call) { h.t.scheme.extend(h.t, h.token, ttlArg, shorten, call) },
		func(v *votes) bool { return v.yes >= need || v.no > n-need })
	deadline := quorum.Deadline(v.start, belief, c.cfg.DriftFactor)
	switch {
	case v.yes >= need && time.Now().Before(deadline):
		h.setTTL(seq, ttl)
		if !h.renewed(seq, v.start, deadline) && h.state() != nil {
			return h.endedError("extend") // its deadline passed while the Extend was out
		}
		return nil
	case v.no > n-need:
		h.end(ErrLost, "Extend found the key no longer holds its token (expired, deleted or taken)")
		return h.endedError("extend")
	}
	return c.pub.Error(Shortfall{Op: "extend", Name: h.t.name, Agreed: v.yes, Needed: need, Total: n, Nodes: v.problems(c)})
}
