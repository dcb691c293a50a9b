package engine

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// attempt is the outcome of one acquisition attempt.
type attempt struct {
	h         *Hold
	left      time.Duration // held by another: until a majority could be free; <0 unknown
	refusers  []int         // held by another: the nodes that refused
	split     bool          // some nodes granted, too few: contenders collided
	rejoin    bool          // the waiter's token was served or left its wait list: ask with a new one
	err       error         // no decision: nodes failed
	permanent bool          // err will not go away by retrying
}

// newToken returns 128 random bits from crypto/rand, hex-encoded.
func newToken() string { return newPrefixedToken("") }

// newPrefixedToken returns prefix followed by newToken's 128 random bits, in one
// allocation.
func newPrefixedToken(prefix string) string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails on supported platforms (Go 1.24+ panics instead)
	var h [32]byte
	hex.Encode(h[:], b[:])
	var s strings.Builder
	s.Grow(len(prefix) + len(h))
	s.WriteString(prefix)
	s.Write(h[:])
	return s.String()
}

// acquireOnce makes one attempt on every node. The clock is read before the first request:
// the lease is exclusive until that instant plus TTL minus the drift allowance, and the
// attempt succeeds only with a majority and with time left.
func acquireOnce(ctx context.Context, lockCtx context.Context, r *request) attempt {
	t, c := r.t, r.t.c
	if t.parts != nil {
		return acquireParts(ctx, lockCtx, r) // a MultiMutex over several hash slots
	}
	n, need := len(c.nodes), t.scheme.need(len(c.nodes))
	token, claim := attemptToken(r)
	v := canvass(ctx, c, nil, t.cfg.TTL,
		func(call *batch.Call) { t.scheme.acquire(t, r, token, call) },
		func(v *votes) bool { return v.settled(need) })
	deadline := quorum.Deadline(v.start, t.cfg.TTL, c.cfg.DriftFactor)
	if r.firstSent.IsZero() {
		r.firstSent = v.start
	}
	verdict := v.verdict(need, time.Now().Before(deadline))
	hearLate(c, v, t, settledOn(v, verdict))
	if verdict == acquired {
		a := acquiredHold(ctx, lockCtx, r, v, token, deadline)
		if a.h != nil && t.policy.waitList && n > 1 {
			// The nodes that refused this attempt may list the waiter still, keeping
			// others out (a listed writer keeps readers out) until its entry dies: it
			// leaves them, as served.
			r.leaveQueue()
		}
		return r.attempted(lockCtx, a, v, verdict)
	}
	// A claim (a FairMutex waiter's id, a Mutex's standing request) is not undone: a
	// release may have granted it meanwhile, and the grantee holds it without asking. Its
	// next attempt finds what landed and keeps it, and a waiter that gives up leaves,
	// which passes on what it was given.
	if (v.yes > 0 || v.unanswered() > 0 || v.failed > 0) && !claim {
		// Only a lock that was held wakes the waiters (on a quorum the majority's wake-up
		// would only send them into the same race; see releaseAbandoned), and so does an
		// attempt with no verdict, which may have kept them out.
		t.releaseAbandoned(token, (verdict == late && n == 1) || verdict == failed)
	}
	return r.attempted(lockCtx, refused(r, v, verdict, need), v, verdict)
}

// attemptToken returns the holder token an attempt asks with (boxed once for every call
// that carries it), and whether it is a claim that a release may grant while the attempt
// is out: the process's standing request (a Mutex that takes turns), the waiter's id
// (FairMutex), or else a fresh token.
func attemptToken(r *request) (token any, claim bool) {
	t := r.t
	r.reserve, r.stands = 1, false
	if ask := t.coord.prepare(r); ask != nil {
		return ask, true
	}
	if t.policy.claim {
		return r.waiter, true
	}
	if m, ok := t.scheme.(tokenMaker); ok {
		return m.newToken(t), false
	}
	return newToken(), false
}

// refused is the outcome of an attempt that did not acquire.
func refused(r *request, v *votes, verdict verdict, need int) attempt {
	t := r.t
	n := len(t.c.nodes)
	switch verdict {
	case late:
		return attempt{err: fmt.Errorf("dlock: lock %q: acquired too late: the lease would already have ended (TTL %v is too short for these round trips)", t.name, t.cfg.TTL)}
	case held:
		if v.gone() {
			return attempt{left: -1, rejoin: true}
		}
		return attempt{left: majorityFree(v.refusedLeft(), max(need-(n-v.no-v.failed), 1)), refusers: v.refusers()}
	case split:
		return attempt{split: true}
	}
	failures := v.problems(t.c)
	a := attempt{err: t.c.pub.Error(Shortfall{Op: "lock", Name: t.name, Agreed: v.yes, Needed: need, Total: n, Nodes: failures})}
	for _, f := range failures {
		a.permanent = a.permanent || permanent(f.Err)
	}
	if w, ok := t.scheme.(errorWrapper); ok {
		a.err = w.wrapError(a.err)
	}
	return a
}

// acquiredHold makes the hold of an attempt that a majority granted in time, once a majority
// has confirmed its fencing token.
func acquiredHold(ctx, lockCtx context.Context, r *request, v *votes, token any, deadline time.Time) attempt {
	t := r.t
	counter := settledOn(v, acquired)
	if len(t.c.nodes) > 1 && !settleFence(ctx, t, v.vals, counter) {
		t.releaseAbandoned(token, true)
		return attempt{err: fmt.Errorf("dlock: lock %q: granted, but too few nodes confirmed fencing token %d in time", t.name, counter)}
	}
	fence, spare := t.coord.acquired(r, token, uint64(counter))
	h := newHold(t, token, fence, spare, t.cfg.TTL, deadline, lockCtx)
	h.permits = r.n
	return attempt{h: h}
}

// settledOn is the fencing counter an attempt settles on: the largest a node granted, the
// top of the block reserved (coordinator.go), when it acquired; else 0, none.
func settledOn(v *votes, verdict verdict) int64 {
	if verdict != acquired {
		return 0
	}
	return slices.Max(v.vals)
}

// majorityFree returns how long until need of the held nodes could be free, from their
// remaining times (0: unknown); -1 when unknown, as it is when any of them is.
func majorityFree(left []time.Duration, need int) time.Duration {
	if d, ok := quorum.UntilFree(need, left); ok && !slices.Contains(left, 0) {
		return d
	}
	return -1
}

// settleFence makes sure a majority holds at least fence before the lock is granted: the
// nodes that granted with a smaller counter are raised to it (and those that grant after
// the verdict as their replies come: hearLate). Any later majority overlaps this one, so
// its INCR starts from fence or above: tokens keep growing across majorities.
func settleFence(ctx context.Context, t *Target, fences []int64, fence int64) bool {
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
		raiseAbandoned(t, low, arg)
		return true
	}
	v := poll(ctx, c, low, t.cfg.TTL,
		func(call *batch.Call) {
			call.Script = scripts.FenceRaise
			call.Keys = fenceKeys(t)
			call.Args = []any{arg}
		},
		func(v *votes) bool { return have+v.yes >= need })
	return have+v.yes >= need
}

// raiseAbandoned raises the fencing counter of the given nodes without waiting for them;
// a node that misses it is raised by the next acquisition whose reply it sends, in time or
// late. With no node to raise (the nodes are in step, the uncontended case) it sends
// nothing.
func raiseAbandoned(t *Target, nodes []int, fence string) {
	sendTo(t.c, nodes, t.cfg.TTL, func(call *batch.Call) bool {
		call.Script = scripts.FenceRaise
		call.Keys = fenceKeys(t)
		call.Args = []any{fence}
		return true
	})
}

// jitter returns a random duration in [d/2, d), so that contenders that collided retry
// at different times.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}
