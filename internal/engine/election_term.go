package engine

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// Term is the engine's side of a dlock.Term: the lease of one term, and what it wrote.
type Term struct {
	*Lease
	e *Election

	mu    sync.Mutex // guards the fields below
	seq   uint64     // the number of the last write sent (election_proclaim's ARGV[3])
	value string     // the value of the newest write that succeeded
	done  uint64     // its number
}

// Value is the value of the newest write that succeeded.
func (t *Term) Value() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.value
}

// Proclaim makes value the leader's value while this term leads.
func (t *Term) Proclaim(ctx context.Context, value string) error {
	if err := checkValue(t.e.t, value); err != nil {
		return err
	}
	if t.Err() != nil {
		return t.h.endedError("proclaim")
	}
	return t.write(ctx, "proclaim", value)
}

// write writes value in the record on a majority of the nodes, numbered after every
// earlier write of the term so that an earlier one that lands later changes nothing. A
// majority that finds the lock without the term's token ends the term (ErrLost).
func (t *Term) write(ctx context.Context, op, value string) error {
	h := t.h
	c := h.c
	t.mu.Lock()
	t.seq++
	seq := t.seq
	t.mu.Unlock()
	args := []any{h.token, strconv.FormatUint(h.fence, 10), strconv.FormatUint(seq, 10),
		value, c.cfg.Owner, t.e.record[1]}
	n, need := len(c.nodes), quorum.Majority(len(c.nodes))
	v := poll(ctx, c, h.t.parts, nil, h.t.cfg.TTL,
		func(_ *Target, call *batch.Call) {
			call.Script, call.Keys = scripts.ElectionProclaim, t.e.record
			call.Args = append(args[:len(args):len(args)], c.nodes[call.Node].PublishCommand())
		},
		func(v *votes) bool { return v.yes >= need || v.no > n-need })
	switch {
	case v.no > n-need:
		// While an Unlock is under way its release may have landed first: the term was
		// resigned, not lost, and the release says so when it ends the hold (as for Extend).
		if !h.lost(op+" found the lock no longer holds the term's token (expired, deleted or taken)") && !h.ended() {
			return fmt.Errorf("dlock: %s %q: %w (an Unlock of this term is in progress)", op, h.t.name, Inner(ErrNotHeld))
		}
		return h.endedError(op)
	case v.yes < need:
		return c.pub.Error(Shortfall{Op: op, Name: h.t.name, Agreed: v.yes, Needed: need, Total: n, Nodes: probeSilent(v.problems(c.nodes))})
	case h.state() != nil:
		return h.endedError(op) // its deadline passed while the write was out
	}
	t.mu.Lock()
	if seq > t.done {
		t.value, t.done = value, seq
	}
	t.mu.Unlock()
	return nil
}

// checkValue says what is wrong with a write of value in t's election, if anything: the
// election's name or options, the value's size, a Client closed.
func checkValue(t *Target, value string) error {
	if t.err != nil {
		return t.err
	}
	if len(value) > MaxValueLen {
		return fmt.Errorf("dlock: election %q: the value is %d bytes long, above the limit of %d: keep a reference to it instead (an address, a key)", t.name, len(value), MaxValueLen)
	}
	return t.c.Usable()
}
