package engine

import (
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// renewalReplies are the replies of one renewal batch (renewals.send), folded as they
// come. A renewal waits for them in two steps: for its verdicts, which need only the nodes
// each hold needs, then for the rest, which only the nodes' silence (renewals.heard) needs.
// Every field is the renewal goroutine's alone.
type renewalReplies struct {
	answers  <-chan *batch.Call
	acks     batch.Acks
	answered []bool // the node answered every call of the batch
	missing  []int  // calls of each node not yet answered
	refused  []bool // some call of the node failed or was refused
	waiting  int    // nodes that have not answered every call
	renewed  int    // nodes that answered every call, each a renewal
	timer    *time.Timer
	over     bool // the timer fired: no more replies are waited for
}

// newRenewalReplies waits for n nodes' perNode replies each on answers, until timeout.
func newRenewalReplies(answers <-chan *batch.Call, acks batch.Acks, n, perNode int, timeout time.Duration) *renewalReplies {
	r := &renewalReplies{
		answers: answers, acks: acks, waiting: n, timer: time.NewTimer(timeout),
		answered: make([]bool, n), missing: make([]int, n), refused: make([]bool, n),
	}
	for node := range r.missing {
		r.missing[node] = perNode
	}
	return r
}

func (r *renewalReplies) fold(call *batch.Call) {
	foldAck(r.acks, call) // a renewal not replicated failed: retried until the deadline
	r.refused[call.Node] = r.refused[call.Node] || call.Err != nil || call.Val <= 0
	if r.missing[call.Node]--; r.missing[call.Node] > 0 {
		return
	}
	r.answered[call.Node] = true
	r.waiting--
	if !r.refused[call.Node] {
		r.renewed++
	}
}

// verdicts waits until every node has answered, or the timeout; or, once need nodes
// renewed every call (then no other reply can change a verdict), until perNode has passed
// since start. The last keeps a silent node of a quorum from holding up the verdicts for
// the whole timeout (a third of the TTL, every renewal while it is silent), which would
// come off the margin between a verdict and the old deadline.
func (r *renewalReplies) verdicts(need int, start time.Time, perNode time.Duration) {
	var enough <-chan time.Time
	for r.waiting > 0 {
		if enough == nil && r.renewed >= need {
			t := time.NewTimer(perNode - time.Since(start))
			defer t.Stop()
			enough = t.C
		}
		select {
		case call := <-r.answers:
			r.fold(call)
		case <-enough:
			return
		case <-r.timer.C:
			r.over = true
			return
		}
	}
}

// rest waits for the other replies, until every node has answered or the timeout, and
// then stops the timer: a node that answers late, yet within the timeout, is heard, as it
// was before verdicts returned early, and is not taken for silent.
func (r *renewalReplies) rest() {
	defer r.timer.Stop()
	for r.waiting > 0 && !r.over {
		select {
		case call := <-r.answers:
			r.fold(call)
		case <-r.timer.C:
			r.over = true
		}
	}
}
