package dlock

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// target is what every lock handle has in common: which lock, and how to hold it.
type target struct {
	c      *Client
	scheme scheme
	name   string
	keys   keyspace.Keys
	cfg    lockConfig
	err    error // an invalid name or option, returned by every method

	// Script arguments that do not change between calls, made (and boxed) once.
	ttlArg           any      // cfg.ttl in milliseconds
	turnsLifeArg     any      // Mutex: how long a turn list outlives its last change, in ms
	turnIDArg        any      // Mutex: turnID()
	channelArg       any      // keys.Channel
	mutexKeys        []string // Mutex acquire: lock, fence, turns, asks; read-only
	mutexReleaseKeys []string // Mutex release: lock, turns, fence, asks; read-only
	lockKeys         []string // the lock key alone (Mutex extend); read-only

	// The same keys boxed for go-redis (batch.Call.KeyArgs), so that a call does not box
	// them again.
	mutexKeyArgs, mutexReleaseKeyArgs, lockKeyArgs []any
}

func newTarget(c *Client, s scheme, name string, opts []LockOption) *target {
	t := &target{c: c, scheme: s, name: name}
	t.cfg, t.err = newLockConfig(opts)
	if t.err == nil {
		t.keys, t.err = keyspace.For(c.cfg.prefix, name)
	}
	t.ttlArg = ms(t.cfg.ttl.Milliseconds())
	// Waiters refresh the list at least once per holder's TTL (their expiry hint).
	t.turnsLifeArg = ms(max(3*t.cfg.ttl, time.Minute).Milliseconds())
	t.turnIDArg = t.turnID()
	t.channelArg = t.keys.Channel
	t.mutexKeys = []string{t.keys.Lock, t.keys.Fence, t.keys.Turns, t.keys.Asks}
	t.mutexReleaseKeys = []string{t.keys.Lock, t.keys.Turns, t.keys.Fence, t.keys.Asks}
	t.lockKeys = []string{t.keys.Lock}
	t.mutexKeyArgs, t.mutexReleaseKeyArgs = boxed(t.mutexKeys), boxed(t.mutexReleaseKeys)
	t.lockKeyArgs = boxed(t.lockKeys)
	return t
}

func boxed(keys []string) []any {
	b := make([]any, len(keys))
	for i, k := range keys {
		b[i] = k
	}
	return b
}

// attempt is the outcome of one acquisition attempt.
type attempt struct {
	h         *hold
	left      time.Duration // held by another: until a majority could be free; <0 unknown
	split     bool          // some nodes granted, too few: contenders collided
	err       error         // no decision: nodes failed
	permanent bool          // err will not go away by retrying
}

// newToken returns 128 random bits from crypto/rand, hex-encoded.
func newToken() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails on supported platforms (Go 1.24+ panics instead)
	return hex.EncodeToString(b[:])
}

// acquireOnce makes one attempt on every node. The clock is read before the first request:
// the lease is exclusive until that instant plus TTL minus the drift allowance, and the
// attempt succeeds only with a majority and with time left.
func (t *target) acquireOnce(ctx context.Context, lockCtx context.Context, r *request) attempt {
	c := t.c
	n := len(c.nodes)
	need := t.scheme.need(n)
	var token any = r.waiter // boxed once for every call that carries it
	stable := t.scheme.stable()
	if ask := t.prepareAttempt(r); ask != nil {
		token, stable = ask, true // the process's standing request (turns.go)
	} else if !stable {
		token = newToken()
	}

	v := c.poll(ctx, nil, t.cfg.ttl,
		func(call *batch.Call) { t.scheme.acquire(t, r, token, call) },
		func(v *votes) bool { return v.settled(need) })
	deadline := quorum.Deadline(v.start, t.cfg.ttl, c.cfg.driftFactor)
	if r.firstSent.IsZero() {
		r.firstSent = v.start
	}
	verdict := v.verdict(need, time.Now().Before(deadline))
	if verdict == acquired {
		return t.acquiredHold(ctx, lockCtx, r, v, token, deadline)
	}
	// A stable token (a FairMutex waiter's, a Mutex's standing request) is not undone: a
	// release may have granted it meanwhile, and the grantee holds it without asking. Its
	// next attempt finds what landed and keeps it, and a waiter that gives up leaves,
	// which passes on what it was given.
	if (v.yes > 0 || v.unanswered() > 0 || v.failed > 0) && !stable {
		// Only a lock that was held wakes the waiters (on a quorum the majority's wake-up
		// would only send them into the same race; see releaseAbandoned), and so does an
		// attempt with no verdict, which may have kept them out.
		wake := (verdict == late && n == 1) || verdict == failed
		t.releaseAbandoned(token, wake)
	}
	switch verdict {
	case late:
		return attempt{err: fmt.Errorf("dlock: lock %q: acquired too late: the lease would already have ended (TTL %v is too short for these round trips)", t.name, t.cfg.ttl)}
	case held:
		return attempt{left: majorityFree(v.refusedLeft(), max(need-(n-v.no-v.failed), 1))}
	case split:
		return attempt{split: true}
	}
	a := attempt{err: &QuorumError{Op: "lock", Name: t.name, Agreed: v.yes, Needed: need, Total: n, Nodes: v.problems(c)}}
	for _, ne := range a.err.(*QuorumError).Nodes {
		a.permanent = a.permanent || permanent(ne.Err)
	}
	return a
}

// acquiredHold makes the hold of an attempt that a majority granted in time, once a majority
// has confirmed its fencing token.
func (t *target) acquiredHold(ctx, lockCtx context.Context, r *request, v *votes, token any, deadline time.Time) attempt {
	// The counter's largest value is the top of the reserved block (handoff.go).
	fence := slices.Max(v.vals)
	if len(t.c.nodes) > 1 && !t.settleFence(ctx, v.vals, fence) {
		t.releaseAbandoned(token, true)
		return attempt{err: fmt.Errorf("dlock: lock %q: granted, but too few nodes confirmed fencing token %d in time", t.name, fence)}
	}
	t.attempted(token)
	// The block reserved is the r.reserve values up to fence; the hold hands off to at
	// most the r.behind waiters queued now (one round), with the lowest.
	base := uint64(fence) - uint64(r.reserve-1)
	if uint64(fence) < uint64(r.reserve) {
		base = uint64(fence) // a counter someone set below the reservation
	}
	spare := min(uint64(r.behind), uint64(fence)-base)
	return attempt{h: t.newHold(token, base, spare, deadline, lockCtx)}
}

// majorityFree returns how long until need of the held nodes could be free, from their
// remaining times (0: unknown); -1 when unknown.
func majorityFree(left []time.Duration, need int) time.Duration {
	if len(left) < need {
		return -1
	}
	slices.Sort(left)
	if left[0] == 0 {
		return -1
	}
	return left[need-1]
}

// settleFence makes sure a majority holds at least fence before the lock is granted: the
// nodes that granted with a smaller counter are raised to it. Any later majority overlaps
// this one, so its INCR starts from fence or above: tokens keep growing across majorities.
func (t *target) settleFence(ctx context.Context, fences []int64, fence int64) bool {
	c := t.c
	need := t.scheme.need(len(c.nodes))
	have := 0
	var low []int
	for i, f := range fences {
		switch {
		case f == fence:
			have++
		case f > 0:
			low = append(low, i)
		}
	}
	arg := strconv.FormatInt(fence, 10)
	if have >= need {
		// Raise the laggards anyway, without waiting: nodes that stay in step make the
		// synchronous raise below rare.
		t.raiseAbandoned(low, arg)
		return true
	}
	v := c.poll(ctx, low, t.cfg.ttl,
		func(call *batch.Call) {
			call.Script = scripts.FenceRaise
			call.Keys = []string{t.keys.Fence}
			call.Args = []any{arg}
		},
		func(v *votes) bool { return have+v.yes >= need })
	return have+v.yes >= need
}

// raiseAbandoned raises the fencing counter of the given nodes without waiting for them;
// a node that misses it is raised by the next acquisition anyway.
func (t *target) raiseAbandoned(nodes []int, fence string) {
	t.c.sendAll(nodes, t.cfg.ttl, func(call *batch.Call) bool {
		call.Script = scripts.FenceRaise
		call.Keys = []string{t.keys.Fence}
		call.Args = []any{fence}
		return true
	})
}

// releaseAbandoned releases token on every node without waiting for the replies: it undoes
// a failed attempt. Nodes where the token is absent answer 0 and nothing changes. With
// wake false it wakes no one: see mutex_release.lua. A node too backed up to take the call
// lets the key expire by itself.
func (t *target) releaseAbandoned(token any, wake bool) {
	t.c.sendAll(nil, t.cfg.ttl, func(call *batch.Call) bool {
		publish := ""
		if wake {
			publish = t.c.nodes[call.Node].publishCommand()
		}
		t.scheme.release(t, token, publish, call)
		return true
	})
}

// newHold builds the hold of a successful acquisition; the caller adopts and schedules it.
func (t *target) newHold(token any, fence, spare uint64, deadline time.Time, lockCtx context.Context) *hold {
	h := &hold{c: t.c, t: t, token: token, fence: fence, spare: spare, ttl: t.cfg.ttl, deadline: deadline}
	h.entry.Value = h
	h.bind(lockCtx)
	return h
}

// start registers a new hold with the Client and its scheduler and returns its lease. If
// the Client was closed meanwhile, the hold is released and ErrClosed returned.
func (t *target) start(h *hold, lockCtx context.Context, start time.Time) (*Lease, error) {
	if err := t.c.adopt(h); err != nil {
		h.cancel(ErrReleased)
		t.releaseAbandoned(h.token, true)
		return nil, err
	}
	var renewAt time.Time
	if h.t.cfg.renew {
		renewAt = start.Add(h.ttl / 3)
	}
	if !t.c.sched.Add(&h.entry, renewAt, h.ttl/6, h.deadline) {
		h.end(ErrReleased, "the client was closed")
		t.releaseAbandoned(h.token, true)
		return nil, ErrClosed
	}
	return &h.outer, nil
}

// jitter returns a random duration in [d/2, d), so that contenders that collided retry
// at different times.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}
