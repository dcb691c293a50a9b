package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// Reading is what a reading of an election found: dlock.Leader's fields.
type Reading struct {
	Value, Owner string
	Token        uint64
	Since        time.Time
	// Err is set only in what Observe sends: ErrNoLeader, or why the nodes could not be
	// read.
	Err error

	holder string    // the term's holder token
	seq    uint64    // the number of the write read (election_proclaim's ARGV[3])
	until  time.Time // local clock: the term's lock has expired on a majority after this, unless renewed
}

// same reports whether r and o say the same: the same write of the same term, or the same
// error.
func (r Reading) same(o Reading) bool {
	if r.Err != nil || o.Err != nil {
		return r.Err != nil && o.Err != nil && r.Err.Error() == o.Err.Error()
	}
	return r.holder == o.holder && r.seq == o.seq
}

// nodeReading is one node's reply to election_read.lua.
type nodeReading struct {
	holder, token, value, owner string
	left                        int64 // the lock's PTTL in ms; -1 no expiry, -2 no key
	fence, seq                  uint64
	since                       int64
	err                         error
}

// Leader reads the election on every node at once.
func (e *Election) Leader(ctx context.Context) (Reading, error) {
	if err := checkValue(e.t, ""); err != nil {
		return Reading{}, err
	}
	return e.read(ctx, nil)
}

// read reads every node, each for at most the per-node timeout, and decides as soon as
// the answers settle it: a node that hangs delays a reading only when its answer could
// change the outcome. A node not waited for finishes its read in the background. A
// message on stale (nil: none) while it waits makes the reading errSuperseded: what the
// nodes answered is older than the change published, and the nodes that did answer
// (split by a handover in flight) would answer anew long before a hung one's timeout.
func (e *Election) read(ctx context.Context, stale <-chan struct{}) (Reading, error) {
	c := e.t.c
	start := time.Now()
	timeout := max(nodeTimeout(c, e.t.cfg.TTL), 500*time.Millisecond)
	type answer struct {
		i int
		r nodeReading
	}
	answers := make(chan answer, len(c.nodes)) // room for all: a late answer never blocks
	for i, n := range c.nodes {
		go func() {
			nctx, cancel := context.WithTimeout(ctx, timeout)
			defer cancel()
			reply, err := scripts.ElectionRead.Run(nctx, n.RDB, e.record, "").Slice()
			heard(ctx, nctx, len(c.nodes), n, err, timeout)
			answers <- answer{i, parseReading(reply, err)}
		}()
	}
	rs := make([]nodeReading, len(c.nodes))
	for i := range rs {
		rs[i].err = errUnanswered
	}
	for pending := len(rs); pending > 0 && !settled(rs, pending); pending-- {
		select {
		case a := <-answers:
			rs[a.i] = a.r
		case <-stale:
			return Reading{}, errSuperseded
		}
	}
	return e.decide(rs, start)
}

// heard tells n how its read went, as a poll's votes do (votes.record): on a quorum, a
// reply clears a silence, and a read that ran out of its own time (nctx's, not the
// caller's ctx) begins one, which the Client's observers hear of (NodeSilent) and which
// lets attempts stop waiting for the node.
func heard(ctx, nctx context.Context, nodes int, n *Node, err error, timeout time.Duration) {
	switch {
	case nodes == 1:
	case isReply(err):
		n.replied()
	case ctx.Err() == nil && nctx.Err() != nil:
		n.missed(timeout)
	}
}

// errSuperseded is the reading that a change published while it waited made stale.
var errSuperseded = errors.New("dlock: reading superseded by a change")

// errUnanswered is the reading of a node that read did not wait for.
var errUnanswered = errors.New("dlock: no answer waited for")

// settled reports whether the answers in rs decide the reading whatever the pending nodes
// answer: a term leads on a majority already, or none could even if every pending node
// held it (and the shortfall of failed nodes could not be one either).
func settled(rs []nodeReading, pending int) bool {
	_, top, failed := tally(rs)
	need := quorum.Majority(len(rs))
	return top >= need || top+failed+pending < need
}

// parseReading decodes election_read.lua's reply; elements of an unexpected type read as
// absent.
func parseReading(reply []any, err error) nodeReading {
	if err != nil {
		return nodeReading{err: err}
	}
	if len(reply) != 8 {
		return nodeReading{err: fmt.Errorf("dlock: unexpected reply from the election read script: %v", reply)}
	}
	text := func(i int) string { s, _ := reply[i].(string); return s }
	number := func(i int) uint64 { n, _ := strconv.ParseUint(text(i), 10, 64); return n }
	r := nodeReading{holder: text(0), token: text(2), fence: number(3), seq: number(4), value: text(5), owner: text(6)}
	r.left, _ = reply[1].(int64)
	r.since = int64(number(7))
	return r
}

// decide finds the term that leads on a majority of rs, read from start: the one whose
// token a majority's locks hold and records name. No term leads when none could, even if
// every node that failed agreed; otherwise a shortfall is an error.
func (e *Election) decide(rs []nodeReading, start time.Time) (Reading, error) {
	c := e.t.c
	need := quorum.Majority(len(rs))
	best, top, _ := tally(rs)
	var failed []Failure
	for i, r := range rs {
		if r.err != nil {
			failed = append(failed, Failure{Addr: c.nodes[i].Name, Err: r.err})
		}
	}
	switch {
	case top >= need:
		return leaderOf(rs, best, need, start), nil
	case top+len(failed) >= need:
		return Reading{}, c.pub.Error(Shortfall{Op: "leader", Name: e.t.name, Agreed: len(rs) - len(failed), Needed: need, Total: len(rs), Nodes: failed})
	}
	return Reading{}, fmt.Errorf("dlock: election %q: %w", e.t.name, Inner(ErrNoLeader))
}

// tally finds the term that leads on the most nodes of rs (its lock holds the token its
// record names), on how many, and how many nodes failed, those not waited for apart.
func tally(rs []nodeReading) (best string, top, failed int) {
	counts := make(map[string]int, 1)
	for _, r := range rs {
		switch {
		case r.err == errUnanswered:
		case r.err != nil:
			failed++
		case r.holder != "" && r.holder == r.token:
			if counts[r.token]++; counts[r.token] > top {
				best, top = r.token, counts[r.token]
			}
		}
	}
	return best, top, failed
}

// leaderOf is the reading of the term whose holder token is holder, which leads on at
// least need nodes of rs: the newest write among them, and the time when fewer than need
// still hold it.
func leaderOf(rs []nodeReading, holder string, need int, start time.Time) Reading {
	var newest nodeReading
	var lefts []int64
	for _, r := range rs {
		if r.err != nil || r.holder != holder || r.token != holder {
			continue
		}
		if r.seq > newest.seq {
			newest = r
		}
		left := r.left
		if left < 0 {
			left = int64(time.Hour / time.Millisecond) // no expiry: look again in a while
		}
		lefts = append(lefts, left)
	}
	slices.SortFunc(lefts, func(a, b int64) int { return cmp.Compare(b, a) })
	return Reading{Value: newest.value, Owner: newest.owner, Token: newest.fence,
		Since: time.UnixMilli(newest.since), holder: holder, seq: newest.seq,
		until: start.Add(time.Duration(lefts[need-1]) * time.Millisecond)}
}
