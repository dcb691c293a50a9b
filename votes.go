package dlock

import (
	"context"
	"fmt"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/quorum"
)

// votes is what the nodes answered to one call each. Every script dlock runs replies with
// an integer: more than zero is a yes (acquired, with the fencing token; released;
// extended), zero or less a no (held, with the holder's remaining time negated; gone).
type votes struct {
	n        int
	vals     []int64 // each node's reply, where answered and not failed
	answered []bool
	errs     []error // one nodeError per node that failed
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
func (c *Client) poll(ctx context.Context, only []int, ttl time.Duration,
	prepare func(call *batch.Call), decide func(v *votes) bool) *votes {
	v, calls := newVotes(len(c.nodes))
	quorum.Fanout(ctx, c.batchers, calls, only, c.nodeTimeout(ttl), prepare, func(call *batch.Call) bool {
		v.answered[call.Node] = true
		switch {
		case call.Err != nil:
			v.failed++
			v.errs = append(v.errs, &nodeError{node: c.nodes[call.Node].name, err: call.Err})
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

// unanswered is how many nodes of a poll of every node never answered.
func (v *votes) unanswered() int { return v.n - v.yes - v.no - v.failed }

// problems lists what went wrong in a poll of every node: the nodes that failed, and, if
// the poll ran out of time rather than reaching a verdict, the nodes that did not answer.
func (v *votes) problems(c *Client) []error {
	errs := v.errs
	if v.decided {
		return errs
	}
	waited := time.Since(v.start).Round(time.Millisecond)
	silence := fmt.Errorf("no answer within %v (down, unreachable, hung or slow)", waited)
	if v.ctxErr != nil {
		silence = fmt.Errorf("no answer before the context ended (%w, after %v)", v.ctxErr, waited)
	}
	for i, ok := range v.answered {
		if !ok {
			errs = append(errs, &nodeError{node: c.nodes[i].name, err: silence})
		}
	}
	return errs
}

// sendAll sends one call to each node (or those listed in only) and does not wait for the
// replies, nor on a node whose queue is full: it is for what expiry makes good if it is
// lost (undoing an attempt, leaving a wait list, raising a counter). prepare fills in a
// call and may decline a node by returning false.
func (c *Client) sendAll(only []int, life time.Duration, prepare func(call *batch.Call) bool) {
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
