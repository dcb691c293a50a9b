package engine

import (
	"fmt"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/renew"
)

// renewBatch renews the leases that fell due together: one write per node, all nodes at
// once. A lease whose renewal succeeded on a majority moves its deadline to the send time
// plus TTL minus drift; one that a majority no longer holds is lost now; any other outcome
// is retried soon, until the deadline ends the lease. Each result is recorded on its hold
// (hold.go, under the hold's mutex): the one call back up the data flow.
func renewBatch(c *Client, entries []*renew.Entry) {
	b := captureRenewals(entries)
	if len(b.holds) == 0 {
		return
	}
	if f := c.hooks.renewCaptured; f != nil {
		if applied := f(); applied != nil {
			defer applied()
		}
	}
	c.sendOwner(c.announce(b.maxTTL)) // in a round trip of its own: renewals go out together (SendAll)
	replies, r := b.send(c)
	r.verdicts(b.need, b.start, nodeTimeout(c, b.minTTL))
	now := time.Now()
	v, _ := newVotes(len(c.nodes), 1)
	for i := 0; i < len(b.holds); {
		i = b.apply(c, v, replies, r.answered, i, now)
	}
	r.rest()
	b.heard(c, replies, r.answered)
}

// renewals is one batch of renewals: the live holds of the entries that fell due, each
// with the number and length of its renewal (see hold.nextRenewal). A MultiMutex over
// several hash slots is there once per part, in a row, with the part in targets.
type renewals struct {
	holds   []*Hold
	targets []*Target // what holds[i] renews: its Target, or one part of it
	ttls    []time.Duration
	seqs    []uint64
	minTTL  time.Duration
	maxTTL  time.Duration // the longest of the holds that name an owner (owner.go); 0: none
	need    int           // the most nodes any hold needs (scheme.need: a majority, a Semaphore's more)
	start   time.Time     // when the batch was sent
}

func captureRenewals(entries []*renew.Entry) *renewals {
	b := &renewals{
		holds:   make([]*Hold, 0, len(entries)),
		targets: make([]*Target, 0, len(entries)),
		ttls:    make([]time.Duration, 0, len(entries)),
		seqs:    make([]uint64, 0, len(entries)),
	}
	for _, e := range entries {
		h := e.Value.(*Hold)
		seq, ttl, live := h.nextRenewal()
		if !live {
			continue
		}
		for _, p := range h.t.parts {
			b.holds = append(b.holds, h)
			b.targets = append(b.targets, p)
			b.ttls = append(b.ttls, ttl)
			b.seqs = append(b.seqs, seq)
		}
		if b.minTTL == 0 || ttl < b.minTTL {
			b.minTTL = ttl
		}
		if namesOwner(h.token) {
			b.maxTTL = max(b.maxTTL, ttl)
		}
		b.need = max(b.need, h.t.scheme.need(len(h.c.nodes)))
	}
	return b
}

// send sends b and returns the calls and their replies to come. replies[node][i] is
// node's answer for b.holds[i]. A call not written by the time the verdict is due is not
// sent at all. Unlike poll, it sends every hold's call to a node in one write
// (batch.SendAll), which never blocks: a batch may renew thousands of leases, and a hung
// server must not hold up the verdict.
func (b *renewals) send(c *Client) (replies [][]*batch.Call, r *renewalReplies) {
	n := len(c.nodes)
	replies = make([][]*batch.Call, n)
	answers := make(chan *batch.Call, n*len(b.holds)) // room for every reply, also the late ones
	b.start = time.Now()
	timeout := renewTimeout(c, b.minTTL)
	r = newRenewalReplies(answers, c.cfg.Acks, n, len(b.holds), timeout)
	for node := range c.nodes {
		calls := make([]*batch.Call, len(b.holds))
		for i, h := range b.holds {
			calls[i] = &batch.Call{Node: node, Deadline: b.start.Add(timeout), Done: answers}
			t := b.targets[i]
			t.scheme.extend(t, h.token, ms(b.ttls[i].Milliseconds()), calls[i])
		}
		replies[node] = calls
		c.batchers[node].SendAll(calls)
	}
	return replies, r
}

// heard tells each node of a quorum whether it answered the batch, as a poll that waited
// its whole timeout does (votes.record): one that let the batch wait in vain, at least its
// per-node timeout, is silent, and one that replied is not.
func (b *renewals) heard(c *Client, replies [][]*batch.Call, answered []bool) {
	v, _ := newVotes(len(c.nodes), 1)
	for node, calls := range replies {
		if answered[node] {
			v.tally(node, calls[0].Val, calls[0].Err)
		}
	}
	v.record(c.nodes, nil, nodeTimeout(c, b.minTTL))
}

// count counts, in v, the nodes' answers for the hold at b.holds[i], and returns the index
// after it. A MultiMutex over several hash slots is in b once per part, in a row, counted
// as a poll of its parts is (votes.reply): it is renewed if every part is renewed on a
// majority, and gone if any part is gone on a majority. A node that did not answer every
// call of the batch is unanswered.
func (b *renewals) count(v *votes, replies [][]*batch.Call, answered []bool, i int) (next int) {
	next = i + 1
	for next < len(b.holds) && b.holds[next] == b.holds[i] {
		next++
	}
	v.reset(b.start, next-i)
	for node, calls := range replies {
		if !answered[node] {
			continue
		}
		for part, call := range calls[i:next] {
			v.reply(node, part, call.Val, call.Err)
		}
	}
	return next
}

// apply applies the outcome of the renewal of the hold at b.holds[i] at now: it proves the
// key lives until the renewal's deadline if a majority renewed it; a majority that no
// longer holds it loses the hold; anything else is retried. It returns the index of the
// next hold in b.
func (b *renewals) apply(c *Client, v *votes, replies [][]*batch.Call, answered []bool, i int, now time.Time) (next int) {
	h, ttl := b.holds[i], b.ttls[i]
	next = b.count(v, replies, answered, i)
	deadline := quorum.Deadline(b.start, ttl, c.cfg.DriftFactor)
	n := len(c.nodes)
	need := h.t.scheme.need(n)
	switch {
	case v.yes >= need && now.Before(deadline):
		if !h.renewed(b.seqs[i], b.start, deadline) {
			// Moot (a shortening Extend was sent meanwhile): renew again now, with the new
			// length. A hold that has ended is no longer scheduled.
			c.sched.Retry(&h.entry, now)
		}
		h.renewalSucceeded()
	case v.no > n-need:
		h.lost("renewal found the key no longer holds its token (expired, deleted or taken)")
	default:
		c.cfg.Logger.Debug("dlock: renewal failed; retrying", "name", h.t.name, "ok", v.yes, "need", need)
		c.sched.Retry(&h.entry, now.Add(max(ttl/12, minBackoff)))
		h.renewalFailed(renewalError(c, h, v, need))
	}
	return next
}

// renewalError says why h's renewal, whose answers v counted, failed: the nodes that
// failed or did not answer, or, when enough confirmed it, that they did so after its
// deadline.
func renewalError(c *Client, h *Hold, v *votes, need int) error {
	nodes := v.problems(c.nodes)
	if len(nodes) == 0 && v.yes >= need {
		return fmt.Errorf("dlock: renew %q: confirmed too late: the lease's deadline had passed", h.t.name)
	}
	return c.pub.Error(Shortfall{Op: "renew", Name: h.t.name, Agreed: v.yes, Needed: need, Total: len(c.nodes), Nodes: nodes})
}

// expire ends a lease whose deadline passed: exclusivity can no longer be guaranteed,
// whether or not Redis can be reached. Its end hook gives the key back if it still holds
// the token (newTarget).
func expire(e *renew.Entry) {
	e.Value.(*Hold).end(ErrLost, reasonExpired)
}
