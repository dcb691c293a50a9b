package engine

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// The first step of the data flow: a call of Lock, TryLock or Acquire becomes a request,
// which re-enters a hold its ctx carries, makes one attempt (a try), or queues (coordinator)
// and waits (wait.go).

// request is one call of Lock, TryLock, Acquire...: what all its attempts share.
type request struct {
	t      *Target      // the lock it asks for
	waiter string       // the caller's id in Redis wait lists; stable across its attempts
	owner  string       // RWMutex downgrade: the token of the write lease the caller holds
	n      int64        // Semaphore: the permits asked for
	try    bool         // one attempt, never wait
	local  *localWaiter // the caller's place in the local queue (&wait), for kinds that queue locally
	wait   localWaiter

	// Mutex, set before each attempt: see coordinator.go and mutex_acquire.lua.
	reserve int64 // fencing tokens to reserve: at least 1 plus one per local waiter behind the caller
	behind  int64 // local waiters behind the caller: the hand-offs the hold may make
	stands  bool  // the attempt asks with the process's standing request (mutex_asks.lua)
	// grants are the grants to this caller (a Mutex's standing request, a FairMutex
	// waiter), made when it first listens: see grants.go.
	grants chan scripts.Grant
	// firstSent is when the first attempt of a request with a claim token started:
	// a FairMutex hand-over to that token happens after it.
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
	if err := r.waitsForItself(ctx, other); err != nil {
		return nil, err
	}
	if c.observed() {
		return r.observedLock(ctx)
	}
	return r.acquire(ctx)
}

// acquire is lock after re-entry: one attempt, or the local queue and the wait.
func (r *request) acquire(ctx context.Context) (*Lease, error) {
	t, c := r.t, r.t.c
	if err := ctx.Err(); err != nil {
		return nil, t.gaveUp(ctx, -1)
	}
	switch {
	case t.policy.waitList:
		r.waiter = newToken() // an id in Redis wait lists; a Mutex or a reader needs none
	}
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.inflight.Done()
	if r.try {
		lease, err := r.tryOnce(ctx)
		if err != nil && t.policy.claim {
			// A try never queues, but its attempt may have landed after a timeout: a claim
			// is not undone by the attempt, so leave, which releases what landed.
			r.leaveQueue()
		}
		return lease, err
	}
	var lease *Lease
	err := t.coord.join(ctx, r)
	if err == nil {
		lease, err = newWaiting(r).wait(ctx)
	}
	if err != nil && t.policy.waitList {
		r.leaveQueue()
	}
	t.coord.leave(ctx, r)
	return lease, err
}

// tryOnce makes one attempt. A lock this process holds is refused without a round trip.
func (r *request) tryOnce(ctx context.Context) (*Lease, error) {
	t := r.t
	if h := t.coord.heldHere(); h != nil {
		return nil, fmt.Errorf("dlock: try lock %q: %w (by this process, lease valid for %v more)", t.name, ErrNotAcquired, time.Until(h.validUntil()).Round(time.Millisecond))
	}
	start := time.Now()
	a := acquireOnce(ctx, ctx, r)
	switch {
	case a.h != nil:
		return a.h.startAcquired(start)
	case a.err != nil:
		return nil, a.err
	case a.left >= 0:
		return nil, fmt.Errorf("dlock: try lock %q: %w (the holder's lease has %v left)", t.name, ErrNotAcquired, a.left)
	}
	return nil, fmt.Errorf("dlock: try lock %q: %w", t.name, ErrNotAcquired)
}

// leaveQueue takes a waiter that gave up out of the wait lists on every node, without
// waiting for the replies, so that it does not hold up the waiters behind it. An entry a
// node misses expires by itself.
func (r *request) leaveQueue() {
	t := r.t
	sendEvery(t.c, time.Duration(waiterTTL)*time.Millisecond, func(call *batch.Call) bool {
		return t.scheme.leave(t, r, call)
	})
}
