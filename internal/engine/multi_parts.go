package engine

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/quorum"
)

// The steps of a MultiMutex over several Redis Cluster hash slots (multi.go): one script
// per part and node where a lock of one slot sends one per node.

// acquireParts makes one attempt of a MultiMutex over several hash slots: its parts in
// order, one poll each, with one token, the lease clock read before the first. Each part
// is judged as acquireOnce judges a whole attempt. The first part that is not granted in
// time ends the attempt: the parts taken before it are given back at once, and waited
// for, so that no name of the set is held once the attempt returns; what that part's nodes
// granted is undone as acquireOnce undoes a failed attempt. The waiter then listens to the
// refusing part alone (request.waitPart).
//
// Every name gets one fencing token, the largest: each part is asked for no less than the
// parts before it got, and a part that got less is raised to it (settleFence, on a
// majority) before the attempt succeeds, which costs a round trip only when the slots'
// counters differ. The observers see one attempt, whatever its number of parts, judged by
// the part that ended it (the last one when it succeeds).
func acquireParts(ctx, lockCtx context.Context, r *request) attempt {
	t, c := r.t, r.t.c
	n, need := len(c.nodes), t.scheme.need(len(c.nodes))
	t.share.prepare(r)
	token := r.tk.token
	owners := c.announce(t.cfg.TTL)          // sent with the first part's calls
	polls := make([]*votes, 0, len(t.parts)) // each part's, by part
	var fence, settled int64
	defer func() { hearParts(c, t.parts, polls, settled) }()
	var start, deadline time.Time
	var v *votes
	r.waitPart.Store(0) // all parts, until one refuses: a release meanwhile is not missed
	for i, p := range t.parts {
		floor := any(strconv.FormatInt(fence, 10))
		v = canvass(ctx, c, p.parts, nil, t.cfg.TTL,
			func(p *Target, call *batch.Call) {
				p.scheme.(*multiScheme).acquireAbove(p, token, floor, call)
				ownerWrite(owners, call)
			},
			func(v *votes) bool { return v.settled(need) })
		polls = append(polls, v)
		if i == 0 {
			start, deadline = v.start, quorum.Deadline(v.start, t.cfg.TTL, c.cfg.DriftFactor)
		}
		v.start = start // the observers' attempt lasts from the first part on
		verdict := v.verdict(need, time.Now().Before(deadline))
		if verdict != acquired {
			undoParts(ctx, t, t.parts[:i], token)
			if v.yes > 0 || v.unanswered() > 0 || v.failed > 0 {
				releaseAbandoned(p, token, (verdict == late && n == 1) || verdict == failed)
			}
			r.waitPart.Store(int32(i) + 1)
			return attempted(lockCtx, r, refused(r, v, verdict, need), v, verdict)
		}
		fence = max(fence, slices.Max(v.vals))
	}
	settled = fence // every part granted: a part's late grant below it raises its node
	for i, p := range t.parts {
		below := slices.ContainsFunc(polls[i].vals, func(f int64) bool { return f > 0 && f < fence })
		if below && !settleFence(ctx, p, polls[i].vals, fence) {
			undoParts(ctx, t, t.parts, token)
			err := fmt.Errorf("dlock: lock %q: granted, but too few nodes confirmed fencing token %d in time", t.name, fence)
			return attempted(lockCtx, r, attempt{err: err}, v, acquired)
		}
	}
	return attempted(lockCtx, r, attempt{h: newHold(t, token, uint64(fence), 0, t.cfg.TTL, deadline, lockCtx)}, v, acquired)
}

// hearParts hears the late replies of each part's poll (hearLate); fence is what the
// attempt settled on, 0 for none.
func hearParts(c *Client, parts []*Target, polls []*votes, fence int64) {
	for i, v := range polls {
		hearLate(c, v, raiserFor(parts[i], fence))
	}
}

// undoParts gives back the parts an attempt took and waits for the replies, bounded by the
// per-node timeout also when ctx has ended. It wakes their waiters: the names are free. A
// node that does not answer in time lets its keys expire by themselves.
func undoParts(ctx context.Context, t *Target, taken []*Target, token any) {
	if len(taken) == 0 {
		return
	}
	c := t.c
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), nodeTimeout(c, t.cfg.TTL))
	defer cancel()
	poll(ctx, c, taken, nil, t.cfg.TTL,
		func(p *Target, call *batch.Call) {
			p.scheme.release(p, token, c.nodes[call.Node].PublishCommand(), call)
		},
		func(*votes) bool { return false })
}
