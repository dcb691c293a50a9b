package engine

import (
	"context"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// The one fan-out: every step that asks the nodes (an attempt, a release, an Extend, a
// fencing counter raised, a MultiMutex's parts given back) sends one call per part and
// node through canvass (poll.go's poll is canvass and the late replies heard), and counts
// the answers and the silent nodes in votes (votes.go); a
// renewal batch, which sends many holds' calls in one write per node, counts each hold's
// answers and the silent nodes the same way (renewal.go). What nothing waits for
// (undoing an attempt, leaving a wait list) goes out through sendTo.

// canvass is poll that leaves the replies it did not wait for to its caller, which passes
// the votes to hearLate once it knows what they are for (an acquisition's fence).
func canvass(ctx context.Context, c *Client, parts []*Target, only []int, ttl time.Duration,
	prepare func(p *Target, call *batch.Call), decide func(v *votes) bool) *votes {
	v, calls := newVotes(len(c.nodes), len(parts))
	v.calls, v.only, v.timeout = calls, only, nodeTimeout(c, ttl)
	v.markSilent(c.nodes, only)
	v.sent = len(c.nodes) * len(parts)
	if only != nil {
		v.sent = len(only) * len(parts)
	}
	quorum.Fanout(ctx, v.start, c.batchers, calls, len(parts), only, v.timeout,
		func(call *batch.Call, j int) { prepare(parts[j], call) },
		func(call *batch.Call) bool {
			foldAck(c.cfg.Acks, call)
			v.reply(call.Node, partOf(calls, call, len(parts)), call.Val, call.Err)
			v.decided = decide(v)
			return v.decided
		})
	v.ctxErr = ctx.Err()
	if d, ok := ctx.Deadline(); ok && v.ctxErr == nil && !time.Now().Before(d) {
		v.ctxErr = context.DeadlineExceeded // the poll's timer, set to ctx's deadline, fired first
	}
	v.silenced = v.record(c.nodes, only, v.timeout)
	return v
}

// partOf is the part that call, one of calls (perNode per node, in order), was sent for.
func partOf(calls []batch.Call, call *batch.Call, perNode int) int {
	if perNode == 1 {
		return 0
	}
	for i := range calls {
		if &calls[i] == call {
			return i % perNode
		}
	}
	return 0
}

// releaseAbandoned releases token on every node and part without waiting for the replies:
// it undoes a failed attempt. Nodes where the token is absent answer 0 and nothing
// changes. With wake false it wakes no one: see mutex_release.lua. A node too backed up
// to take the call lets the key expire by itself.
func releaseAbandoned(t *Target, token any, wake bool) {
	for _, p := range t.parts {
		sendEvery(t.c, t.cfg.TTL, func(call *batch.Call) bool {
			publish := ""
			if wake {
				publish = t.c.nodes[call.Node].PublishCommand()
			}
			p.scheme.release(p, token, publish, call)
			return true
		})
	}
}

// sendEvery sends one call to every node (sendTo).
func sendEvery(c *Client, life time.Duration, prepare func(call *batch.Call) bool) {
	sendTo(c, c.allNodes, life, prepare)
}

// sendTo sends one call to each of the given nodes (none if the list is empty) and does
// not wait for the replies, nor on a node whose queue is full: it is for what expiry
// makes good if it is lost (undoing an attempt, leaving a wait list, raising a counter).
// prepare fills in a call and may decline a node by returning false.
func sendTo(c *Client, nodes []int, life time.Duration, prepare func(call *batch.Call) bool) {
	if len(nodes) == 0 {
		return
	}
	replies := make(chan *batch.Call, len(nodes))
	deadline := time.Now().Add(life)
	for _, i := range nodes {
		call := &batch.Call{Node: i, Deadline: deadline, Done: replies}
		if prepare(call) {
			c.batchers[i].TrySend(call)
		}
	}
}

// prepareRaise prepares fence_raise.lua: t's counters raised to fence, never lowered.
func prepareRaise(t *Target, fence string, call *batch.Call) {
	call.Script = scripts.FenceRaise
	call.Keys = t.scheme.fenceKeys(t)
	call.Args = []any{fence}
}

// raiseAbandoned raises the fencing counter of the given nodes without waiting for them;
// a node that misses it is raised by the next acquisition whose reply it sends, in time or
// late. With no node to raise (the nodes are in step, the uncontended case) it sends
// nothing.
func raiseAbandoned(t *Target, nodes []int, fence string) {
	sendTo(t.c, nodes, t.cfg.TTL, func(call *batch.Call) bool {
		prepareRaise(t, fence, call)
		return true
	})
}
