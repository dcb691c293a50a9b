package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/renew"
)

// hold is one acquisition in Redis: one token, one fencing token, one deadline. Re-entrant
// leases share the hold of the outermost one.
type Hold struct {
	c     *Client // t.c, kept at hand
	t     *Target // the lock it holds: its name, keys and options
	token any     // ownership: 128 random bits, a hex string (boxed once: scripts take it as an argument)
	fence uint64
	spare uint64 // fencing tokens reserved above fence, for hand-offs in this process

	entry renew.Entry // scheduled with the Client's scheduler while the hold lives

	ctx    context.Context // the outer lease's context; cancelled with the cause when the hold ends
	cancel context.CancelCauseFunc
	outer  *Lease      // the lease that owns the hold: the one Lock returned, allocated with it
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

// newHold returns a hold of t with its outer lease, allocated at once by the public
// package (Public.NewHeld); the caller binds it to a context.
func newHold(t *Target, token any, fence, spare uint64, ttl time.Duration, deadline time.Time) *Hold {
	h, l := t.c.pub.NewHeld()
	h.c, h.t, h.outer = t.c, t, l
	h.token, h.fence, h.spare, h.ttl, h.deadline = token, fence, spare, ttl, deadline
	h.entry.Value = h
	return h
}

// belief is how long a call of length ttl sent now proves the key lives: no longer than a
// shortening Extend still out sets it. The caller holds mu.
func (h *Hold) belief(ttl time.Duration) time.Duration {
	if h.short > 0 {
		return min(ttl, h.shortTTL)
	}
	return ttl
}

// nextRenewal numbers a renewal about to be sent and gives its length and belief, at once: a
// shortening Extend numbered between the two would otherwise leave a renewal numbered
// after its cut with the length from before it. live is false for a hold that has ended
// or is being released.
func (h *Hold) nextRenewal() (seq uint64, ttl, belief time.Duration, live bool) {
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
func (h *Hold) state() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err == nil && !time.Now().Before(h.deadline) {
		return ErrLost
	}
	return h.err
}

// ended reports whether end has run.
func (h *Hold) ended() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.err != nil
}

func (h *Hold) validUntil() time.Time {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.deadline
}

// end ends the hold once: it records why, cancels the lease context, stops renewal and
// tells the local queue. It reports whether this call ended it.
func (h *Hold) end(err error, reason string) bool {
	h.mu.Lock()
	if h.err != nil {
		h.mu.Unlock()
		return false
	}
	h.err, h.reason = err, reason
	h.mu.Unlock()
	h.c.sched.Remove(&h.entry)
	h.cancel(err)
	h.c.forget(h) // back to the local queue (localqueue.go): its head may now ask Redis
	if err == ErrLost {
		h.c.cfg.Logger.Warn("dlock: lease lost", "name", h.t.name, "token", h.fence, "reason", reason)
	}
	return true
}

// endedError is the error of Unlock or Extend on an ended hold.
func (h *Hold) endedError(op string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	err, reason := h.err, h.reason
	if err == nil {
		err, reason = ErrLost, "its deadline passed"
	}
	return fmt.Errorf("dlock: %s %q: %w: %w (%s)", op, h.t.name, ErrNotHeld, err, reason)
}

// bind makes h's outer lease and its context, which keeps the values of lockCtx (the ctx
// given to Lock), not its cancellation, and is cancelled when h ends.
func (h *Hold) bind(lockCtx context.Context) {
	parent, _ := lockCtx.Value(leaseKey{}).(*leaseChain)
	h.values = leaseValues{lock: lockCtx, chain: leaseChain{lease: h.outer, parent: parent}}
	h.ctx, h.cancel = context.WithCancelCause(&h.values)
	h.outer.h, h.outer.outer, h.outer.ctx = h, true, h.ctx
}

// startExtend numbers an Extend to ttl about to be sent and reports whether it shortens
// the lease. A shortening one takes effect now: see the comment on hold's fields.
func (h *Hold) startExtend(ttl time.Duration) (seq uint64, shorten bool, belief time.Duration, err error) {
	h.mu.Lock()
	if h.releasing {
		h.mu.Unlock()
		return 0, false, 0, fmt.Errorf("dlock: extend %q: %w (an Unlock of this lease is in progress)", h.t.name, ErrNotHeld)
	}
	h.extending++
	h.sent++
	seq, shorten, belief = h.sent, ttl < h.ttl, h.belief(ttl)
	if !shorten {
		h.mu.Unlock()
		return seq, false, belief, nil
	}
	h.cut, h.ttl, h.ttlSeq = seq, ttl, seq
	h.shortTTL = h.belief(ttl) // before counting it: the shortest of those out
	h.short++
	// Read the clock after the number is taken: the script runs after this instant, so
	// the key lives at least until then plus ttl.
	deadline := quorum.Deadline(time.Now(), ttl, h.c.cfg.DriftFactor)
	moved := deadline.Before(h.deadline)
	if moved {
		h.deadline = deadline
	}
	h.mu.Unlock()
	if moved {
		h.c.sched.Shorten(&h.entry, deadline)
	}
	return seq, true, ttl, nil
}

// endExtend records that an Extend's poll is over. A shortening one's reply is in, or it
// was given up (its fate then unknown: a call lost in the network past the per-node
// timeout is the one case this does not cover).
func (h *Hold) endExtend(shortened bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.extending--
	if shortened {
		if h.short--; h.short == 0 {
			h.shortTTL = 0
		}
	}
}

// setTTL makes ttl the length of later renewals, unless a later Extend has set it.
func (h *Hold) setTTL(seq uint64, ttl time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if seq >= h.ttlSeq {
		h.ttl, h.ttlSeq = ttl, seq
	}
}

// renewed records a successful renewal or Extend number seq, sent at start: the key lives
// at least until deadline, so the hold's deadline moves there unless it is already later.
// A result sent before the newest shortening Extend is moot (it may have landed before
// it), and nothing revives a hold whose deadline has passed. It reports whether it
// applied the result.
func (h *Hold) renewed(seq uint64, start time.Time, deadline time.Time) bool {
	h.mu.Lock()
	if h.err != nil || h.releasing || seq < h.cut || !time.Now().Before(h.deadline) {
		h.mu.Unlock()
		return false
	}
	if deadline.After(h.deadline) {
		h.deadline = deadline
	}
	deadline, ttl := h.deadline, h.ttl
	h.mu.Unlock()
	var renewAt time.Time
	if h.t.cfg.Renew {
		renewAt = start.Add(ttl / 3)
	}
	h.c.sched.Renewed(&h.entry, renewAt, deadline)
	return true
}
