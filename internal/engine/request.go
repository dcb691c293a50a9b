package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/seed51c676c8/dlock/internal/scripts"
)

// The first step of the data flow: a call of Lock, TryLock or Acquire becomes a request,
// which re-enters a hold its ctx carries, makes one attempt (a try), or queues (the
// kind's sharing) and waits (wait.go).

// request is one call of Lock, TryLock, Acquire...: what all its attempts share.
type request struct {
	t     *Target      // the lock it asks for
	try   bool         // one attempt, never wait
	n     int64        // what it asks for: a Semaphore's permits
	owner string       // what it asks for: an RWMutex reader's downgrade of the write lease with this token
	local *localWaiter // the caller's place in the local queue (&wait), for kinds that queue locally
	wait  localWaiter

	waiter string // the caller's id in Redis wait lists (policy.waitList); stable across its attempts
	tk     ticket // the current attempt's, made by the sharing's prepare
	// grants are the grants to this caller (a Mutex's standing request, a FairMutex
	// waiter), made when it first listens: see grants.go; firstSent is when the first
	// attempt asking with the FairMutex waiter's id was made: a hand-over to it came later.
	grants    chan scripts.Grant
	firstSent time.Time
	attempts  int // attempts made in Redis, for the observers
	// waitPart (a MultiMutex over several hash slots) is 1 + the part that refused the
	// last attempt, whose channels alone wake the waiter, or 0 for all of them: set by the
	// attempt, read by the channels' Route (multi.go).
	waitPart atomic.Int32
}

// lock acquires t for r, waiting until ctx is done unless r.try is set.
func (r *request) lock(ctx context.Context) (*Lease, error) {
	t, c := r.t, r.t.c
	if err := c.Usable(); err != nil {
		return nil, err
	}
	if t.err != nil {
		return nil, t.err
	}
	same, other := carried(ctx, c, t.scheme.kind(), t.keys.Lock)
	if same != nil && t.policy.reentrant {
		return newInnerLease(same, ctx), nil
	}
	if err := waitsForItself(ctx, r, other); err != nil {
		return nil, err
	}
	if !observed(c) {
		return r.acquire(ctx)
	}
	name, kind := t.name, t.scheme.kind()
	start := waitStarted(c, ctx, name, kind)
	lease, err := r.acquire(ctx)
	var h *Hold
	if lease != nil {
		h = lease.h
	}
	waitEnded(c, ctx, name, kind, start, r.attempts, h, err)
	return lease, err
}

// acquire is lock after re-entry: one attempt, or the local queue and the wait.
func (r *request) acquire(ctx context.Context) (*Lease, error) {
	t, c := r.t, r.t.c
	if err := ctx.Err(); err != nil {
		return nil, gaveUp(t.name, ctx, -1)
	}
	if t.policy.waitList {
		r.waiter = c.newToken() // an id in Redis wait lists; a Mutex or a reader needs none
	}
	if err := c.local.enter(t.keys.Lock, &c.inflight); err != nil {
		return nil, err
	}
	defer c.inflight.Done()
	if r.try {
		lease, err := r.tryOnce(ctx)
		if err != nil && r.tk.claim {
			// A try never queues, but its attempt may have landed after a timeout: a claim
			// is not undone by the attempt, so leave, which releases what landed.
			leaveWaitList(r)
		}
		return lease, err
	}
	var lease *Lease
	err := t.share.join(ctx, r)
	if err == nil {
		lease, err = newWaiting(r).wait(ctx)
	}
	if err != nil && t.policy.waitList {
		leaveWaitList(r)
	}
	t.share.leave(ctx, r)
	return lease, err
}

// tryOnce makes one attempt. A lock this process holds is refused without a round trip.
func (r *request) tryOnce(ctx context.Context) (*Lease, error) {
	t := r.t
	if h := t.share.heldHere(); h != nil {
		return nil, fmt.Errorf("dlock: try lock %q: %w (by this process, lease valid for %v more)", t.name, Inner(ErrNotAcquired), time.Until(h.validUntil()).Round(time.Millisecond))
	}
	start := time.Now()
	a := t.attempt(ctx, ctx, r)
	switch {
	case a.h != nil:
		return a.h.startAcquired(start)
	case a.err != nil:
		return nil, a.err
	case a.left >= 0:
		return nil, fmt.Errorf("dlock: try lock %q: %w (the holder's lease has %v left)", t.name, Inner(ErrNotAcquired), a.left)
	}
	return nil, fmt.Errorf("dlock: try lock %q: %w", t.name, Inner(ErrNotAcquired))
}
