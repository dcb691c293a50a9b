package dlock

import (
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/renew"
)

// renewBatch renews the leases that fell due together: one write per node, all nodes at
// once. A lease whose renewal succeeded on a majority moves its deadline to the send time
// plus TTL minus drift; one that a majority no longer holds is lost now; any other outcome
// is retried soon, until the deadline ends the lease.
func (c *Client) renewBatch(entries []*renew.Entry) {
	n := len(c.nodes)
	holds := make([]*hold, 0, len(entries))
	ttls := make([]time.Duration, 0, len(entries))
	seqs := make([]uint64, 0, len(entries))
	beliefs := make([]time.Duration, 0, len(entries))
	minTTL := time.Duration(0)
	for _, e := range entries {
		h := e.Value.(*hold)
		seq, ttl, belief, live := h.nextRenewal()
		if !live {
			continue
		}
		holds = append(holds, h)
		ttls = append(ttls, ttl)
		seqs = append(seqs, seq)
		beliefs = append(beliefs, belief)
		if minTTL == 0 || ttl < minTTL {
			minTTL = ttl
		}
	}
	if len(holds) == 0 {
		return
	}
	if f := c.hooks.renewCaptured; f != nil {
		if applied := f(); applied != nil {
			defer applied()
		}
	}

	// replies[node][i] is node's answer for holds[i]. A node counts once it has answered
	// every call; a call not written by the time the verdict is due is not sent at all.
	replies := make([][]*batch.Call, n)
	answers := make(chan *batch.Call, n*len(holds)) // room for every reply, also the late ones
	start := time.Now()
	timeout := c.renewTimeout(minTTL)
	for node := range c.nodes {
		calls := make([]*batch.Call, len(holds))
		for i, h := range holds {
			calls[i] = &batch.Call{Node: node, Deadline: start.Add(timeout), Done: answers}
			h.t.scheme.extend(h.t, h.token, ms(ttls[i].Milliseconds()), false, calls[i])
		}
		replies[node] = calls
		c.batchers[node].SendAll(calls) // one write; never blocks: a hung server must not hold up the verdict
	}
	answered := make([]bool, n)
	missing := make([]int, n) // calls of each node not yet answered
	for node := range missing {
		missing[node] = len(holds)
	}
	timer := time.NewTimer(timeout)
	defer timer.Stop()
wait:
	for waiting := n; waiting > 0; {
		select {
		case call := <-answers:
			if missing[call.Node]--; missing[call.Node] == 0 {
				answered[call.Node] = true
				waiting--
			}
		case <-timer.C:
			break wait
		}
	}

	now := time.Now()
	for i, h := range holds {
		need := h.t.scheme.need(n)
		ok, gone := 0, 0
		for node := range c.nodes {
			if !answered[node] {
				continue
			}
			switch call := replies[node][i]; {
			case call.Err != nil:
			case call.Val == 1:
				ok++
			default:
				gone++
			}
		}
		deadline := quorum.Deadline(start, beliefs[i], c.cfg.driftFactor)
		switch {
		case ok >= need && now.Before(deadline):
			if !h.renewed(seqs[i], start, deadline) {
				// Moot (a shortening Extend was sent meanwhile): renew again now, with
				// the new length. A hold that has ended is no longer scheduled.
				c.sched.Retry(&h.entry, now)
			}
		case gone > n-need:
			h.end(ErrLost, "renewal found the key no longer holds its token (expired, deleted or taken)")
		default:
			c.cfg.logger.Debug("dlock: renewal failed; retrying", "name", h.t.name, "ok", ok, "need", need)
			c.sched.Retry(&h.entry, now.Add(max(ttls[i]/12, minBackoff)))
		}
	}
}

// renewTimeout is how long a renewal waits for the nodes' replies: a hung node must not
// hold up the others' verdict for long.
func (c *Client) renewTimeout(ttl time.Duration) time.Duration {
	return min(ttl/3, max(4*c.nodeTimeout(ttl), 50*time.Millisecond))
}

// expire ends a lease whose deadline passed: exclusivity can no longer be guaranteed,
// whether or not Redis can be reached.
func (c *Client) expire(e *renew.Entry) {
	e.Value.(*hold).end(ErrLost, "its deadline passed without a successful renewal")
}
