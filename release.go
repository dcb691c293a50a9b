package dlock

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
func (h *hold) release(ctx context.Context) error {
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
	if !extending && h.t.coord.handOff(h) {
		return nil
	}

	c := h.c
	// The per-node timeout follows the lock's TTL option, not a length an Extend set: a
	// lease shortened to expire soon is still worth releasing on a slow server.
	wait := max(ttl, h.t.cfg.ttl)
	if ctx.Err() != nil {
		// An Unlock deferred with a context that has ended since (a request's, say) still
		// releases: leaving the key to expire would keep everyone out for a whole TTL.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), c.nodeTimeout(wait))
		defer cancel()
	}
	n, need := len(c.nodes), h.t.scheme.need(len(c.nodes))
	v := c.poll(ctx, nil, wait,
		func(call *batch.Call) { h.t.scheme.release(h.t, h.token, c.nodes[call.Node].publishCommand(), call) },
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
	err := &QuorumError{Op: "unlock", Name: h.t.name, Agreed: released + gone, Needed: need, Total: n, Nodes: v.problems(c)}
	return fmt.Errorf("%w; the lease has ended here and its key expires by itself within %v", err, ttl)
}

// extend sets the lease to last ttl from now on a majority, and ttl as the length of later
// renewals. An Extend that lengthens leaves the hold unchanged on failure; one that
// shortens takes effect when it is sent, since it may land whatever the reply: the
// deadline moves down and later renewals use ttl, even if it fails. Either way, a majority
// that says the key is no longer ours ends the hold.
func (h *hold) extend(ctx context.Context, ttl time.Duration) error {
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
	deadline := quorum.Deadline(v.start, belief, c.cfg.driftFactor)
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
	return &QuorumError{Op: "extend", Name: h.t.name, Agreed: v.yes, Needed: need, Total: n, Nodes: v.problems(c)}
}

// startExtend numbers an Extend to ttl about to be sent and reports whether it shortens
// the lease. A shortening one takes effect now: see the comment on hold's fields.
func (h *hold) startExtend(ttl time.Duration) (seq uint64, shorten bool, belief time.Duration, err error) {
	h.mu.Lock()
	if h.releasing {
		h.mu.Unlock()
		return 0, false, 0, fmt.Errorf("dlock: extend %q: %w (an Unlock of this lease is in progress)", h.t.name, ErrNotHeld)
	}
	h.extending++
	h.sent++
	seq, shorten, belief = h.sent, ttl < h.ttl, h.belief(ttl)
	if !shorten {
		h.mu.Unlock()
		return seq, false, belief, nil
	}
	h.cut, h.ttl, h.ttlSeq = seq, ttl, seq
	h.shortTTL = h.belief(ttl) // before counting it: the shortest of those out
	h.short++
	// Read the clock after the number is taken: the script runs after this instant, so
	// the key lives at least until then plus ttl.
	deadline := quorum.Deadline(time.Now(), ttl, h.c.cfg.driftFactor)
	moved := deadline.Before(h.deadline)
	if moved {
		h.deadline = deadline
	}
	h.mu.Unlock()
	if moved {
		h.c.sched.Shorten(&h.entry, deadline)
	}
	return seq, true, ttl, nil
}

// endExtend records that an Extend's poll is over. A shortening one's reply is in, or it
// was given up (its fate then unknown: a call lost in the network past the per-node
// timeout is the one case this does not cover).
func (h *hold) endExtend(shortened bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.extending--
	if shortened {
		if h.short--; h.short == 0 {
			h.shortTTL = 0
		}
	}
}

// setTTL makes ttl the length of later renewals, unless a later Extend has set it.
func (h *hold) setTTL(seq uint64, ttl time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if seq >= h.ttlSeq {
		h.ttl, h.ttlSeq = ttl, seq
	}
}

// renewed records a successful renewal or Extend number seq, sent at start: the key lives
// at least until deadline, so the hold's deadline moves there unless it is already later.
// A result sent before the newest shortening Extend is moot (it may have landed before
// it), and nothing revives a hold whose deadline has passed. It reports whether it
// applied the result.
func (h *hold) renewed(seq uint64, start time.Time, deadline time.Time) bool {
	h.mu.Lock()
	if h.err != nil || h.releasing || seq < h.cut || !time.Now().Before(h.deadline) {
		h.mu.Unlock()
		return false
	}
	if deadline.After(h.deadline) {
		h.deadline = deadline
	}
	deadline, ttl := h.deadline, h.ttl
	h.mu.Unlock()
	var renewAt time.Time
	if h.t.cfg.renew {
		renewAt = start.Add(ttl / 3)
	}
	h.c.sched.Renewed(&h.entry, renewAt, deadline)
	return true
}
