package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// votes is what the nodes answered to one call each. Every script dlock runs replies with
// an integer: more than zero is a yes (acquired, with the fencing token; released;
// extended), zero or less a no (gone; or held: an acquire script's refusal, which says how
// long the holder has left and which holder it is, decoded by scripts.Refusal).
type votes struct {
	n        int
	vals     []int64 // each node's reply, where answered and not failed
	answered []bool
	errs     []error // each node's error, where it failed; made at the first failure
	yes, no  int
	failed   int
	decided  bool  // the caller's decide said so before every node answered or time ran out
	ctxErr   error // ctx's error when the poll ended, if ctx ended it
	start    time.Time

	// Storage for the replies of up to inlineNodes nodes, and for the call of a poll of one
	// deployment, which then allocates once.
	valsBuf     [inlineNodes]int64
	answeredBuf [inlineNodes]bool
	callsBuf    [1]batch.Call
}

const inlineNodes = 5

func (v *votes) failedAt(node int) bool { return v.errs != nil && v.errs[node] != nil }

func newVotes(n int) (*votes, []batch.Call) {
	v := &votes{n: n, start: time.Now()}
	if n <= inlineNodes {
		v.vals, v.answered = v.valsBuf[:n], v.answeredBuf[:n]
	} else {
		v.vals, v.answered = make([]int64, n), make([]bool, n)
	}
	if n == 1 {
		return v, v.callsBuf[:]
	}
	return v, make([]batch.Call, n)
}

// poll sends one call to each node (all of them, or those listed in only) and counts the
// replies until decide says the outcome is settled, every node answered, the per-node
// timeout passed or ctx ended. Calls still outstanding then are abandoned, not cancelled.
func poll(ctx context.Context, c *Client, only []int, ttl time.Duration,
	prepare func(call *batch.Call), decide func(v *votes) bool) *votes {
	v, calls := newVotes(len(c.nodes))
	quorum.Fanout(ctx, c.batchers, calls, only, c.nodeTimeout(ttl), prepare, func(call *batch.Call) bool {
		v.answered[call.Node] = true
		switch {
		case call.Err != nil:
			v.failed++
			if v.errs == nil {
				v.errs = make([]error, v.n)
			}
			v.errs[call.Node] = call.Err
		case call.Val > 0:
			v.yes++
			v.vals[call.Node] = call.Val
		default:
			v.no++
			v.vals[call.Node] = call.Val
		}
		v.decided = decide(v)
		return v.decided
	})
	v.ctxErr = ctx.Err()
	if d, ok := ctx.Deadline(); ok && v.ctxErr == nil && !time.Now().Before(d) {
		v.ctxErr = context.DeadlineExceeded // the poll's timer, set to ctx's deadline, fired first
	}
	return v
}

// A verdict is what one acquisition attempt came to.
type verdict int

const (
	acquired verdict = iota // a majority granted, with time left on the lease
	late                    // a majority granted, but the lease would already have ended
	held                    // one holder has a majority: wait for it
	split                   // contenders split the nodes; no one has a majority
	failed                  // nodes failed or did not answer: no verdict
)

// verdict judges an attempt from its votes, need of which must agree; inTime says whether
// the lease still had time left when the votes were in. Nodes that failed, or did not
// answer before the poll gave up, can block any verdict but a grant.
func (v *votes) verdict(need int, inTime bool) verdict {
	blocked := v.failed
	if !v.decided {
		blocked += v.unanswered()
	}
	switch {
	case v.yes >= need && inTime:
		return acquired
	case v.yes >= need:
		return late
	case blocked > v.n-need:
		return failed
	case v.heldByOne() >= need:
		return held
	}
	return split
}

// heldByOne is the most nodes that refused on behalf of one holder. A node that refused
// for no single holder (readers, permits, a waiting writer) counts for every holder, as if
// the same holders held them all: waiting for them is what the caller must do anyway.
func (v *votes) heldByOne() int {
	var tags [inlineNodes]uint16
	byTag, unknown, most := tags[:0], 0, 0
	for i, val := range v.vals {
		if !v.answered[i] || val > 0 || v.failedAt(i) {
			continue
		}
		switch _, tag := scripts.Refusal(val); tag {
		case 0:
			unknown++
		default:
			byTag = append(byTag, tag)
		}
	}
	for _, tag := range byTag {
		most = max(most, countTag(byTag, tag))
	}
	return most + unknown
}

func countTag(tags []uint16, tag uint16) int {
	n := 0
	for _, t := range tags {
		if t == tag {
			n++
		}
	}
	return n
}

// refusedLeft lists how long each node that refused said its holder has left (0: unknown).
func (v *votes) refusedLeft() []time.Duration {
	var left []time.Duration
	for i, val := range v.vals {
		if v.answered[i] && val <= 0 && !v.failedAt(i) {
			l, _ := scripts.Refusal(val)
			left = append(left, l)
		}
	}
	return left
}

// unanswered is how many nodes of a poll of every node never answered.
func (v *votes) unanswered() int { return v.n - v.yes - v.no - v.failed }

// problems lists what went wrong in a poll of every node, in the order of the nodes: the
// nodes that failed, and, if the poll ran out of time rather than reaching a verdict, the
// nodes that did not answer.
func (v *votes) problems(c *Client) []Failure {
	var silence error
	if !v.decided {
		waited := time.Since(v.start).Round(time.Millisecond)
		silence = fmt.Errorf("no answer within %v (down, unreachable, hung or slow)", waited)
		if v.ctxErr != nil {
			silence = fmt.Errorf("no answer before the context ended (%w, after %v)", v.ctxErr, waited)
		}
	}
	var out []Failure
	for i, answered := range v.answered {
		switch {
		case v.failedAt(i):
			out = append(out, Failure{Addr: c.nodes[i].Name, Err: v.errs[i]})
		case !answered && silence != nil:
			out = append(out, Failure{Addr: c.nodes[i].Name, Err: silence})
		}
	}
	return out
}

// sendAll sends one call to each node (or those listed in only) and does not wait for the
// replies, nor on a node whose queue is full: it is for what expiry makes good if it is
// lost (undoing an attempt, leaving a wait list, raising a counter). prepare fills in a
// call and may decline a node by returning false.
func sendAll(c *Client, only []int, life time.Duration, prepare func(call *batch.Call) bool) {
	nodes := only
	if nodes == nil {
		nodes = make([]int, len(c.nodes))
		for i := range nodes {
			nodes[i] = i
		}
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
