package engine

import (
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
	replies, answered := b.send(c)
	b.heard(c, replies, answered)
	now := time.Now()
	for i := 0; i < len(b.holds); {
		i = b.apply(c, renewReplies{replies, answered, i}, now)
	}
}

// renewals is one batch of renewals: the live holds of the entries that fell due, each
// with the number and length of its renewal (see hold.nextRenewal). A MultiMutex
// over several hash slots is there once per part, in a row, with the part in targets.
type renewals struct {
	holds   []*Hold
	targets []*Target // what holds[i] renews: its Target, or one part of it
	ttls    []time.Duration
	seqs    []uint64
	minTTL  time.Duration
	start   time.Time // when the batch was sent
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
		if h.t.parts == nil {
			b.add(h, h.t, seq, ttl)
		}
		for _, p := range h.t.parts {
			b.add(h, p, seq, ttl)
		}
		if b.minTTL == 0 || ttl < b.minTTL {
			b.minTTL = ttl
		}
	}
	return b
}

// add appends the renewal of h's Target t (h.t, or one part of it).
func (b *renewals) add(h *Hold, t *Target, seq uint64, ttl time.Duration) {
	b.holds = append(b.holds, h)
	b.targets = append(b.targets, t)
	b.ttls = append(b.ttls, ttl)
	b.seqs = append(b.seqs, seq)
}

// send sends b and waits for the replies. replies[node][i] is node's answer for
// b.holds[i]; a node counts (answered) once it has answered every call. A call not written
// by the time the verdict is due is not sent at all.
func (b *renewals) send(c *Client) (replies [][]*batch.Call, answered []bool) {
	n := len(c.nodes)
	replies = make([][]*batch.Call, n)
	answers := make(chan *batch.Call, n*len(b.holds)) // room for every reply, also the late ones
	b.start = time.Now()
	timeout := renewTimeout(c, b.minTTL)
	for node := range c.nodes {
		calls := make([]*batch.Call, len(b.holds))
		for i, h := range b.holds {
			calls[i] = &batch.Call{Node: node, Deadline: b.start.Add(timeout), Done: answers}
			t := b.targets[i]
			t.scheme.extend(t, h.token, ms(b.ttls[i].Milliseconds()), calls[i])
		}
		replies[node] = calls
		c.batchers[node].SendAll(calls) // one write; never blocks: a hung server must not hold up the verdict
	}
	answered = make([]bool, n)
	missing := make([]int, n) // calls of each node not yet answered
	for node := range missing {
		missing[node] = len(b.holds)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	for waiting := n; waiting > 0; {
		select {
		case call := <-answers:
			c.foldAck(call) // a renewal not replicated failed: retried until the deadline
			if missing[call.Node]--; missing[call.Node] == 0 {
				answered[call.Node] = true
				waiting--
			}
		case <-timer.C:
			return replies, answered
		}
	}
	return replies, answered
}

// heard tells each node of a quorum whether it answered the batch, as a poll does
// (votes.record): one that let the batch wait the whole timeout in vain, at least its
// per-node timeout, is silent, and one that replied is not. Renewals never wait less for
// a silent node, and an attempt waits less for one only to end sooner, never to grant.
func (b *renewals) heard(c *Client, replies [][]*batch.Call, answered []bool) {
	if len(c.nodes) == 1 {
		return
	}
	timeout := c.nodeTimeout(b.minTTL)
	for node, n := range c.nodes {
		switch {
		case !answered[node]:
			n.missed(timeout)
		case isReply(replies[node][0].Err):
			n.replied()
		}
	}
}

// counted counts the nodes that renewed the hold at.i and those that no longer hold it,
// and returns the index after it. A MultiMutex over several hash slots is in b once per
// part, in a row: it is renewed only if every part is, and lost if any part is.
// worst is the index of the part that the fewest nodes renewed, whose replies say why a
// renewal failed.
func (b *renewals) counted(at renewReplies) (ok, gone, next, worst int) {
	ok, gone = countRenewed(at.calls, at.answered, at.i)
	next, worst = at.i+1, at.i
	for ; next < len(b.holds) && b.holds[next] == b.holds[at.i]; next++ {
		partOK, partGone := countRenewed(at.calls, at.answered, next)
		if partOK < ok {
			worst = next
		}
		ok, gone = min(ok, partOK), max(gone, partGone)
	}
	return ok, gone, next, worst
}

// countRenewed counts the nodes that renewed the hold numbered i and those that no longer
// hold it, among the nodes that answered.
func countRenewed(replies [][]*batch.Call, answered []bool, i int) (ok, gone int) {
	for node, calls := range replies {
		if !answered[node] {
			continue
		}
		switch call := calls[i]; {
		case call.Err != nil:
		case call.Val == 1:
			ok++
		default:
			gone++
		}
	}
	return ok, gone
}

// apply applies the outcome of the renewal of the hold at.i, whose replies at locates, at
// now: it proves the key lives until the renewal's deadline if a majority renewed it; a
// majority that no longer holds it loses the hold; anything else is retried. It returns
// the index of the next hold in b.
func (b *renewals) apply(c *Client, at renewReplies, now time.Time) (next int) {
	h, ttl := b.holds[at.i], b.ttls[at.i]
	ok, gone, next, worst := b.counted(at)
	deadline := quorum.Deadline(b.start, ttl, c.cfg.DriftFactor)
	n := len(c.nodes)
	need := h.t.scheme.need(n)
	switch {
	case ok >= need && now.Before(deadline):
		if !h.renewed(b.seqs[at.i], b.start, deadline) {
			// Moot (a shortening Extend was sent meanwhile): renew again now, with the new
			// length. A hold that has ended is no longer scheduled.
			c.sched.Retry(&h.entry, now)
		}
		h.renewalSucceeded()
	case gone > n-need:
		h.lost("renewal found the key no longer holds its token (expired, deleted or taken)")
	default:
		c.cfg.Logger.Debug("dlock: renewal failed; retrying", "name", h.t.name, "ok", ok, "need", need)
		c.sched.Retry(&h.entry, now.Add(max(ttl/12, minBackoff)))
		h.renewalFailed(ok, renewReplies{at.calls, at.answered, worst})
	}
	return next
}

// renewTimeout is how long a renewal waits for the nodes' replies: a hung node must not
// hold up the others' verdict for long.
func renewTimeout(c *Client, ttl time.Duration) time.Duration {
	return min(ttl/3, max(4*c.nodeTimeout(ttl), 50*time.Millisecond))
}

// expire ends a lease whose deadline passed: exclusivity can no longer be guaranteed,
// whether or not Redis can be reached. The key may outlive the lease (an Extend shortened
// the lease, not the key; a renewal landed after the deadline): it is given back if it
// still holds the token, so that waiters need not wait for it to expire. A token is never
// reused, so that release is harmless whenever it lands.
func expire(e *renew.Entry) {
	h := e.Value.(*Hold)
	if h.end(ErrLost, reasonExpired) && !h.t.policy.allOrNone { // allOrNone: end gives it back
		h.t.releaseAbandoned(h.token, true)
	}
}
