package engine

import (
	"context"
	"strconv"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/quorum"
)

// The replies a poll did not wait for. quorum.Fanout returns once the outcome is settled,
// and a call still out is written to when its reply comes, on the poll's channel. These
// replies are heard for two reasons.
//
// Any reply ends its node's silence: a node that came back, or is merely slower than the
// others, is waited for again.
//
// A grant of an acquisition that shows its node's fencing counter below the fence the
// acquisition settled on raises that node (fence_raise.lua, which only raises). settleFence
// raises the nodes that granted in time; without this, a node that grants late stays behind.
// A node restarted empty nearly always grants late on its first call after the restart (a
// new connection, its script cache reloaded), so on a quorum whose nodes restart one at a
// time a node behind was the rule: once restarts had wiped the nodes that were raised, a
// majority of such laggards sent the token back (issue 23). Raised as they are heard, the
// live nodes keep step, and a node restarted empty cannot, with others behind, make such a
// majority. A node in step (the uncontended case) gets nothing, and a raise that lands
// late, after the hold ended or after later acquisitions, only raises.

// poll sends one call per part to each node (all of them, or those listed in only) and
// counts the replies until decide says the outcome is settled, every node answered, the
// per-node timeout passed or ctx ended. Calls still outstanding then are abandoned, not
// cancelled; the replies of silent nodes among them are heard (hearLate).
func poll(ctx context.Context, c *Client, parts []*Target, only []int, ttl time.Duration,
	prepare func(p *Target, call *batch.Call), decide func(v *votes) bool) *votes {
	v := canvass(ctx, c, parts, only, ttl, prepare, decide)
	hearLate(c, v, raiser{})
	return v
}

// A raiser raises the nodes whose late grant of an acquisition of t shows a counter below
// the fence it settled on (lateReplies).
type raiser struct {
	t     *Target
	fence int64
}

func (r raiser) raise(node int) {
	raiseAbandoned(r.t, []int{node}, strconv.FormatInt(r.fence, 10))
}

// lateReplies is what hear waits for, on a goroutine of its own.
type lateReplies struct {
	nodes   []*Node
	closed  <-chan struct{} // the Client's done: nothing is heard after Close
	replies chan *batch.Call
	pending int           // replies still to come
	wait    time.Duration // how long they are waited for
	// raise, unless zero, is an acquisition on a quorum that settled on a fence: a late
	// grant below it raises its node's counter to it.
	raise raiser
}

// hearLate hears the replies that v's poll did not wait for, if one is wanted: that of a
// node the poll found silent (votes.record), or, with raise (an acquisition on a quorum
// that settled on a fence), every one. It does not wait for them.
func hearLate(c *Client, v *votes, raise raiser) {
	if !v.silenced && raise.fence == 0 {
		return
	}
	pending := v.sent - v.seen
	if pending == 0 {
		return
	}
	l := lateReplies{nodes: c.nodes, closed: c.done, replies: v.calls[0].Done, pending: pending,
		wait: silentPolls * v.timeout, raise: raise}
	if v.only != nil {
		l.replies = v.calls[v.only[0]*(len(v.calls)/v.n)].Done
	}
	go l.hear()
}

// hear takes the late replies as they come, until all have come, for a while (a node that
// did not answer by then is raised by the next acquisition it answers), or until Close.
func (l lateReplies) hear() {
	timer := time.NewTimer(l.wait)
	defer timer.Stop()
	for ; l.pending > 0; l.pending-- {
		select {
		case call := <-l.replies:
			l.heard(call)
		case <-timer.C:
			return
		case <-l.closed:
			return
		}
	}
	quorum.Recycle(l.replies) // every reply is in: the next poll may use the channel
}

// heard acts on one late reply: a reply ends its node's silence (a late transport error
// does not), and a grant below the fence raises its node, without waiting for it.
func (l *lateReplies) heard(call *batch.Call) {
	if isReply(call.Err) {
		l.nodes[call.Node].replied()
	}
	if l.raise.fence > 0 && call.Err == nil && call.Val > 0 && call.Val < l.raise.fence {
		l.raise.raise(call.Node)
	}
}
