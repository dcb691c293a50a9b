package engine

import (
	"context"
	"errors"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// An election is a Mutex's lock (the same key, tokens and fencing counter, so its
// acquisition lands late as harmlessly as a Mutex's, and its candidates wake on the same
// releases) plus a record beside it, in the same hash slot (keyspace.Keys.Leader): the
// value, owner and tokens of the term that wrote last. A term leads only while the lock
// holds its token, which is what every reader checks, so a record that outlives its term
// names no leader. A term writes the record as it starts and at each Proclaim, with
// election_proclaim.lua, which writes only while the lock holds the term's token; the
// record expires with the lock, whose renewals (mutex_extend.lua, given the record) keep it
// alive.
//
// Its candidates do not share a hold within a process (no hand-off, no turns): each term
// has a token of its own, so that a write of an ended term can never pass for the next
// one's.

// MaxValueLen is the longest value a leader may proclaim, in bytes: a record is read by
// every observer at every change, so it stays small.
const MaxValueLen = 64 << 10

// Election is the engine of one election.
type Election struct {
	t      *Target
	record []string // lock, record: election_proclaim's and election_read's keys
}

// NewElection returns the engine of the election called name; cfgErr is an invalid option.
func NewElection(c *Client, name string, cfg LockConfig, cfgErr error) *Election {
	t := newTarget(c, name, cfg, cfgErr, func(t *Target) scheme {
		return &electionScheme{mutexScheme{mutexKeys: newMutexKeys(t, false)}}
	})
	return &Election{t: t, record: []string{t.keys.Lock, t.keys.Leader()}}
}

// electionScheme: a Mutex without hand-off or turns, whose renewals keep the record alive.
type electionScheme struct{ mutexScheme }

func (*electionScheme) kind() string            { return KindElection }
func (*electionScheme) sharing(*Target) sharing { return alone{} }
func (*electionScheme) policy() policy          { return policy{track: true} }

func (*electionScheme) extend(t *Target, token any, ttl string, call *batch.Call) {
	call.Script = scripts.MutexExtend
	call.Keys = []string{t.keys.Lock, t.keys.Gone, t.keys.Leader()}
	call.Args = []any{token, ttl}
}

// Name is the election's name.
func (e *Election) Name() string { return e.t.name }

// Campaign waits until the caller leads (try: one attempt) and returns its term, whose
// record holds value.
func (e *Election) Campaign(ctx context.Context, value string, try bool) (*Term, error) {
	if err := checkValue(e.t, value); err != nil {
		return nil, err
	}
	for {
		l, err := e.t.Lock(ctx, try)
		if err != nil {
			return nil, err
		}
		term := &Term{Lease: l, e: e}
		err = term.write(ctx, "campaign", value)
		if err == nil {
			return term, nil
		}
		// The term ended before its record was written (it expired, or a node failed):
		// give the lock back, and wait again if it was lost.
		undo, cancel := context.WithTimeout(context.WithoutCancel(ctx), UnlockTimeout)
		_ = l.Unlock(undo)
		cancel()
		if try || ctx.Err() != nil || !errors.Is(err, ErrNotHeld) {
			return nil, err
		}
	}
}

// backoff is the pause before the next try after n failures in a row: from 50ms, doubling,
// at most 2s.
func backoff(n int) time.Duration {
	return min(50*time.Millisecond<<min(n, 6), 2*time.Second)
}
