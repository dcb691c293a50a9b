package engine

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/quorum"
)

// attempt is the outcome of one acquisition attempt.
type attempt struct {
	h         *Hold
	left      time.Duration // held by another: until a majority could be free; <0 unknown
	refusers  []int         // held by another: the nodes that refused
	split     bool          // some nodes granted, too few: contenders collided
	rejoin    bool          // the waiter's token was served or left its wait list: ask with a new one
	err       error         // no decision: nodes failed
	permanent bool          // err will not go away by retrying
}

// acquireOnce makes one attempt on every node. The clock is read before the first request:
// the lease is exclusive until that instant plus TTL minus the drift allowance, and the
// attempt succeeds only with a majority and with time left.
func acquireOnce(ctx context.Context, lockCtx context.Context, r *request) attempt {
	t, c := r.t, r.t.c
	n, need := len(c.nodes), t.scheme.need(len(c.nodes))
	t.share.prepare(r)
	tk := &r.tk
	var owners []*batch.Call
	if namesOwner(tk.token) {
		owners = c.announce(t.cfg.TTL)
	}
	v := canvass(ctx, c, t.parts, nil, t.cfg.TTL,
		func(p *Target, call *batch.Call) { p.scheme.acquire(p, r, tk, call); ownerWrite(owners, call) },
		func(v *votes) bool { return v.settled(need) })
	defer v.recycle()
	deadline := quorum.Deadline(v.start, t.cfg.TTL, c.cfg.DriftFactor)
	verdict := v.verdict(need, time.Now().Before(deadline))
	hearLate(c, v, raiserFor(t, settledOn(v, verdict)))
	if verdict == acquired {
		a := acquiredHold(ctx, lockCtx, r, v, deadline)
		if a.h != nil && t.policy.waitList && n > 1 {
			// The nodes that refused this attempt may list the waiter still, keeping
			// others out (a listed writer keeps readers out) until its entry dies: it
			// leaves them, as served.
			leaveWaitList(r)
		}
		return attempted(lockCtx, r, a, v, verdict)
	}
	// A claim (a FairMutex waiter's id, a Mutex's standing request) is not undone: a
	// release may have granted it meanwhile, and the grantee holds it without asking. Its
	// next attempt finds what landed and keeps it, and a waiter that gives up leaves,
	// which passes on what it was given.
	if (v.yes > 0 || v.unanswered() > 0 || v.failed > 0) && !tk.claim {
		// Only a lock that was held wakes the waiters (on a quorum the majority's wake-up
		// would only send them into the same race; see releaseAbandoned), and so does an
		// attempt with no verdict, which may have kept them out.
		releaseAbandoned(t, tk.token, (verdict == late && n == 1) || verdict == failed)
	}
	return attempted(lockCtx, r, refused(r, v, verdict, need), v, verdict)
}

// refused is the outcome of an attempt that did not acquire.
func refused(r *request, v *votes, verdict verdict, need int) attempt {
	t := r.t
	n := len(t.c.nodes)
	switch verdict {
	case late:
		return attempt{err: fmt.Errorf("dlock: lock %q: acquired too late: the lease would already have ended (TTL %v is too short for these round trips)", t.name, t.cfg.TTL)}
	case held:
		if v.gone() {
			return attempt{left: -1, rejoin: true}
		}
		return attempt{left: majorityFree(v.refusedLeft(), max(need-(n-v.no-v.failed), 1)), refusers: v.refusers()}
	case split:
		return attempt{split: true}
	}
	failures := probeSilent(v.problems(t.c.nodes))
	clashes(t, failures)
	a := attempt{err: t.c.pub.Error(Shortfall{Op: "lock", Name: t.name, Agreed: v.yes, Needed: need, Total: n, Nodes: failures})}
	for _, f := range failures {
		a.permanent = a.permanent || permanent(f.Err)
	}
	a.err = t.scheme.wrapError(a.err)
	return a
}

// acquiredHold makes the hold of an attempt that a majority granted in time, once a majority
// has confirmed its fencing token.
func acquiredHold(ctx, lockCtx context.Context, r *request, v *votes, deadline time.Time) attempt {
	t := r.t
	counter := settledOn(v, acquired)
	if len(t.c.nodes) > 1 && !settleFence(ctx, t, v.vals, counter) {
		releaseAbandoned(t, r.tk.token, true)
		return attempt{err: fmt.Errorf("dlock: lock %q: granted, but too few nodes confirmed fencing token %d in time", t.name, counter)}
	}
	fence, spare := t.share.acquired(r, uint64(counter))
	h := newHold(t, r.tk.token, fence, spare, t.cfg.TTL, deadline, lockCtx)
	h.permits = r.n
	return attempt{h: h}
}

// settledOn is the fencing counter an attempt settles on: the largest a node granted, the
// top of the block reserved (hotkey.go), when it acquired; else 0, none.
func settledOn(v *votes, verdict verdict) int64 {
	if verdict != acquired {
		return 0
	}
	return slices.Max(v.vals)
}

// majorityFree returns how long until need of the held nodes could be free, from their
// remaining times (0: unknown); -1 when unknown, as it is when any of them is.
func majorityFree(left []time.Duration, need int) time.Duration {
	if d, ok := quorum.UntilFree(need, left); ok && !slices.Contains(left, 0) {
		return d
	}
	return -1
}
