package dlock

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock/internal/renew"
)

// hold is one acquisition in Redis: one token, one fencing token, one deadline. Re-entrant
// leases share the hold of the outermost one.
type hold struct {
	c     *Client // t.c, kept at hand
	t     *target // the lock it holds: its name, keys and options
	token any     // ownership: 128 random bits, a hex string (boxed once: scripts take it as an argument)
	fence uint64
	spare uint64 // fencing tokens reserved above fence, for hand-offs in this process

	entry renew.Entry // scheduled with the Client's scheduler while the hold lives

	ctx    context.Context // the outer lease's context; cancelled with the cause when the hold ends
	cancel context.CancelCauseFunc
	outer  Lease       // the lease that owns the hold: the one Lock returned
	values leaseValues // ctx's parent

	// Several extensions of one hold (renewals, Extends) may be in flight at once, and on
	// some transports they reach Redis in another order than they were sent. Redis keeps
	// the deadline safe whatever the order: renewals and lengthening Extends only ever
	// lengthen the key (the extend scripts' default mode), so each success proves the key
	// lives at least its TTL from when it was sent, and the deadline is the latest such
	// proof. Only an Extend that shortens sets the expiry exactly; it moves the deadline
	// down when it is sent, before it can land, and makes the results of everything sent
	// before it moot (cut), since those may have landed before it. Anything sent while it
	// is out may land before it too, so its proof counts for no more than the shorter TTL
	// (belief).
	mu        sync.Mutex
	ttl       time.Duration // guarded by mu: the length of each renewal
	ttlSeq    uint64        // guarded by mu: the Extend that set ttl
	deadline  time.Time     // guarded by mu: exclusivity ends here unless renewed
	err       error         // guarded by mu: nil while held, then ErrReleased or ErrLost
	reason    string        // guarded by mu: why the hold ended, for messages
	releasing bool          // guarded by mu: Unlock is in progress; renewal results are moot
	extending int           // guarded by mu: Extends in flight, which may shorten the lease
	sent      uint64        // guarded by mu: renewals and Extends sent, numbered from 1
	cut       uint64        // guarded by mu: the newest shortening Extend sent; older results are moot
	short     int           // guarded by mu: shortening Extends out (sent, poll not over)
	shortTTL  time.Duration // guarded by mu: the shortest TTL of those; 0 when short is 0
}

// belief is how long a call of length ttl sent now proves the key lives: no longer than a
// shortening Extend still out sets it. The caller holds mu.
func (h *hold) belief(ttl time.Duration) time.Duration {
	if h.short > 0 {
		return min(ttl, h.shortTTL)
	}
	return ttl
}

// nextRenewal numbers a renewal about to be sent and gives its length and belief, at once: a
// shortening Extend numbered between the two would otherwise leave a renewal numbered
// after its cut with the length from before it. live is false for a hold that has ended
// or is being released.
func (h *hold) nextRenewal() (seq uint64, ttl, belief time.Duration, live bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil || h.releasing {
		return 0, 0, 0, false
	}
	h.sent++
	return h.sent, h.ttl, h.belief(h.ttl), true
}

// state reports the hold's error, counting a passed deadline as lost even if the scheduler
// has not fired yet: ValidUntil and Err never disagree.
func (h *hold) state() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil && !time.Now().Before(h.deadline) {
		return ErrLost
	}
	return h.err
}

// ended reports whether end has run.
func (h *hold) ended() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err != nil
}

func (h *hold) validUntil() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadline
}

// end ends the hold once: it records why, cancels the lease context, stops renewal and
// tells the local queue. It reports whether this call ended it.
func (h *hold) end(err error, reason string) bool {
	h.mu.Lock()
	if h.err != nil {
		h.mu.Unlock()
		return false
	}
	h.err, h.reason = err, reason
	h.mu.Unlock()
	h.c.sched.Remove(&h.entry)
	h.cancel(err)
	h.c.forget(h)
	if err == ErrLost {
		h.c.cfg.logger.Warn("dlock: lease lost", "name", h.t.name, "token", h.fence, "reason", reason)
	}
	return true
}

// endedError is the error of Unlock or Extend on an ended hold.
func (h *hold) endedError(op string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	err, reason := h.err, h.reason
	if err == nil {
		err, reason = ErrLost, "its deadline passed"
	}
	return fmt.Errorf("dlock: %s %q: %w: %w (%s)", op, h.t.name, ErrNotHeld, err, reason)
}

// Lease is one holding of a lock. It ends when it is unlocked or lost; after that it stays
// ended. Its methods are safe for concurrent use, from any goroutine.
//
// A Lease returned by re-entry (Lock with a context that carries a live lease of the same
// lock) shares the hold of the outer lease: same token, same deadline. Unlocking it ends
// only it; unlocking the outer lease releases the lock and ends them all.
type Lease struct {
	h     *hold
	outer bool
	ctx   context.Context

	// For a re-entrant lease only: its own end, guarded by mu.
	mu     sync.Mutex
	err    error
	cancel context.CancelCauseFunc
	stop   func() bool // stops the propagation of the hold's end
}

// Name returns the name of the lock.
func (l *Lease) Name() string { return l.h.t.name }

// Token returns the fencing token: strictly greater than the token of every earlier
// acquisition of the same name, across processes and restarts of the client. Storage that
// remembers the largest token it has seen can refuse the writes of a stale holder.
// Re-entry does not change it.
func (l *Lease) Token() uint64 { return l.h.fence }

// Context returns a context that carries the values of the ctx given to Lock (but not its
// deadline or cancellation) and this lease, and that is cancelled, with ErrLost or
// ErrReleased as its cause, when the lease ends. Work done under the lock should use it:
// it is how that work learns it must stop.
func (l *Lease) Context() context.Context { return l.ctx }

// Done returns a channel that is closed when the lease ends, released or lost.
func (l *Lease) Done() <-chan struct{} { return l.ctx.Done() }

// Err returns nil while the lease is held, then ErrReleased or ErrLost (exactly those
// values).
func (l *Lease) Err() error {
	if !l.outer {
		l.mu.Lock()
		err := l.err
		l.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return l.h.state()
}

// ValidUntil returns the instant, on the local clock, until which exclusivity is
// guaranteed: the start of the last successful request, plus the TTL, minus the drift
// allowance. It moves forward with each renewal and Extend.
func (l *Lease) ValidUntil() time.Time { return l.h.validUntil() }

// Extend makes the lease last ttl from now and makes ttl the length of later renewals. ctx
// bounds the request. If Redis says the key is no longer ours, the lease is lost and
// Extend returns ErrNotHeld. Otherwise, on failure, an Extend that would lengthen the lease
// leaves it unchanged; one that shortens it (ttl below the current length) takes effect
// when it is sent, whatever the reply, since it may have landed: ValidUntil moves down to
// at most now plus ttl, and later renewals use ttl.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := l.Err(); err != nil {
		if !l.outer && l.h.state() == nil {
			return fmt.Errorf("dlock: extend %q: %w: %w (this re-entrant lease was unlocked)", l.h.t.name, ErrNotHeld, err)
		}
		return l.h.endedError("extend")
	}
	if err := checkTTL(ttl); err != nil {
		return err
	}
	return l.h.extend(ctx, ttl)
}

// Unlock ends the lease. For the outer lease it releases the lock in Redis and wakes the
// next waiter; ctx bounds the request, and a ctx that has already ended gets the per-node
// timeout instead, so that a deferred Unlock with an expired request context still
// releases. After Unlock returns, the lease has ended whatever the result: if the release
// failed (Redis unreachable), the key expires by itself within its TTL. Unlock of a lease
// that has already ended returns ErrNotHeld.
func (l *Lease) Unlock(ctx context.Context) error {
	if l.outer {
		return l.h.release(ctx)
	}
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return fmt.Errorf("dlock: unlock %q: %w: %w (already unlocked)", l.h.t.name, ErrNotHeld, l.err)
	}
	if err := l.h.state(); err != nil {
		l.mu.Unlock()
		return l.h.endedError("unlock")
	}
	l.err = ErrReleased
	l.mu.Unlock()
	l.stop()
	l.cancel(ErrReleased)
	return nil
}
