package engine

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/renew"
)

// hold is one acquisition in Redis: one token, one fencing token, one deadline. Re-entrant
// leases share the hold of the outermost one.
type Hold struct {
	c     *Client // t.c, kept at hand
	t     *Target // the lock it holds: its name, keys and options
	token any     // ownership: 128 random bits as a hex string, boxed once (scripts take it as an argument); a TimestampMutex's *stamp
	fence uint64
	spare uint64 // fencing tokens reserved above fence, for hand-offs in this process
	// permits (Semaphore): how many it holds; set before the hold is shared.
	permits int64

	entry renew.Entry // scheduled with the Client's scheduler while the hold lives

	outer  *Lease      // the lease that owns the hold: the one Lock returned, allocated with it
	values leaseValues // ctx's parent

	// Several extensions of one hold (renewals, Extends) may be in flight at once, and any
	// of them may reach Redis after later ones, even after the caller gave up on it. Redis
	// keeps the deadline safe whatever the order: the extend scripts only ever lengthen
	// the key, so each success proves the key lives at least its TTL from when it was
	// sent, and the deadline is the latest such proof. An Extend that shortens does so
	// here only: it moves the deadline down when it is sent and makes the results of
	// everything sent before it moot (cut), so that ValidUntil stays where it was asked to
	// be; the key expires no earlier than before.
	mu        sync.Mutex
	ttl       time.Duration // guarded by mu: the length of each renewal
	ttlSeq    uint64        // guarded by mu: the Extend that set ttl
	deadline  time.Time     // guarded by mu: exclusivity ends here unless renewed
	err       error         // guarded by mu: nil while held, then ErrReleased or ErrLost
	reason    string        // guarded by mu: why the hold ended, for messages
	releasing bool          // guarded by mu: Unlock is in progress; renewal results are moot
	sent      uint64        // guarded by mu: renewals and Extends sent, numbered from 1
	cut       uint64        // guarded by mu: the newest shortening Extend sent; older results are moot
	// ctx is the outer lease's context, made by the first call of context (most leases are
	// unlocked without anyone asking for it) and cancelled with the cause when the hold
	// ends; nil until then, like cancel. Guarded by mu.
	ctx    context.Context
	cancel context.CancelCauseFunc

	obs *holdObs // what the observers were told (observer.go); nil without observers
}

// holdHooks are what a hold's start and end mean outside it, registered by its Target when
// it is made (newTarget), so that a hold never calls back into what holds it: the
// Client's record of its holds and the local queue (local.go: adopt, forget), and what a
// kind does with a lost hold (a MultiMutex gives back the names it still has).
type holdHooks struct {
	// start records a hold that is about to start, or says why it cannot (ErrClosed).
	start func(h *Hold) error
	// end runs once, when the hold ends with err (ErrReleased or ErrLost) for reason.
	end func(h *Hold, err error, reason string)
}

// heldLease is a hold and its outer lease, allocated at once: an acquisition costs one
// allocation for the hold, its lease and the lease's context values (see leaseValues).
type heldLease struct {
	hold  Hold
	lease Lease
}

// newHold returns a hold of t with its outer lease, bound to lockCtx (see bind). The
// caller starts it.
func newHold(t *Target, token any, fence, spare uint64, ttl time.Duration, deadline time.Time, lockCtx context.Context) *Hold {
	x := new(heldLease)
	h := &x.hold
	h.c, h.t, h.outer = t.c, t, &x.lease
	h.token, h.fence, h.spare, h.ttl, h.deadline = token, fence, spare, ttl, deadline
	h.entry.Value = h
	h.obs = newHoldObs(t.c)
	h.bind(lockCtx)
	return h
}

// startAcquired starts the hold of an attempt sent at start: renewed a third of the way
// into its TTL.
func (h *Hold) startAcquired(start time.Time) (*Lease, error) {
	var renewAt time.Time
	if h.t.cfg.Renew {
		renewAt = start.Add(RenewalInterval(h.ttl))
	}
	return h.start(renewAt, h.ttl/6)
}

// startGranted starts a granted hold (grants.go). The grant set the key for at most
// grantLength; the first renewal, a third of the way into that, sets it to the TTL (a
// short hold, the common case on a hot lock, is released before it is due). The
// observers hear of the hand-off once the hold has started: one that Close refused is
// never delivered.
func (h *Hold) startGranted() (*Lease, error) {
	length := min(h.t.cfg.TTL, grantLength)
	l, err := h.start(h.deadline.Add(-2*length/3), length/6)
	if err == nil {
		handedOff(h, false)
	}
	return l, err
}

// start registers a new hold with the Client and its scheduler (renewal due at renewAt,
// zero for none, with slack) and returns its lease. If the Client was closed meanwhile,
// the hold is released and ErrClosed returned.
func (h *Hold) start(renewAt time.Time, slack time.Duration) (*Lease, error) {
	if err := h.t.hooks.start(h); err != nil {
		releaseAbandoned(h.t, h.token, true)
		return nil, err
	}
	if !h.c.sched.Add(&h.entry, renewAt, slack, h.deadline) {
		h.end(ErrReleased, "the client was closed")
		releaseAbandoned(h.t, h.token, true)
		return nil, ErrClosed
	}
	return h.outer, nil
}

// nextRenewal numbers a renewal about to be sent and gives its length, at once: a
// shortening Extend numbered between the two would otherwise leave a renewal numbered
// after its cut with the length from before it. live is false for a hold that has ended
// or is being released.
func (h *Hold) nextRenewal() (seq uint64, ttl time.Duration, live bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.err != nil || h.releasing {
		return 0, 0, false
	}
	h.sent++
	return h.sent, h.ttl, true
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
	cancel := h.cancel
	h.mu.Unlock()
	h.c.sched.Remove(&h.entry)
	if cancel != nil {
		cancel(err)
	}
	h.t.hooks.end(h, err, reason) // the local queue's head may now ask Redis
	// After the hook: an observer told of the end finds the lock free in this process.
	if h.obs != nil { // reportEnd needs the lease's context: made here only for observers
		reportEnd(h.obs, h.context(), h.t.name, h.t.scheme.kind(), h.fence, err, reason)
	}
	if err == ErrLost {
		h.c.cfg.Logger.Warn("dlock: lease lost", "name", h.t.name, "token", h.fence, "reason", reason)
	}
	return true
}

// reasonExpired is why a hold whose deadline passed ended: the one reason that makes a
// loss LossExpired.
const reasonExpired = "its deadline passed without a successful renewal"

// renewalFailed tells the observers that a renewal of h failed with err, unless h has
// ended; renewalSucceeded, that one succeeded after failures.
func (h *Hold) renewalFailed(err error) {
	h.obs.renewal(h.t.name, h.t.scheme.kind(), h.fence, time.Until(h.validUntil()), err)
}

func (h *Hold) renewalSucceeded() {
	if h.obs != nil && h.state() == nil {
		h.obs.renewal(h.t.name, h.t.scheme.kind(), h.fence, time.Until(h.validUntil()), nil)
	}
}

// lost ends the hold as lost for reason, which a renewal or an Extend found in Redis, and
// reports whether it did: not while an Unlock is in progress, since the key may be gone
// because its release landed first, and the release, which ends the hold whatever it
// finds, says how.
func (h *Hold) lost(reason string) bool {
	h.mu.Lock()
	releasing := h.releasing
	h.mu.Unlock()
	return !releasing && h.end(ErrLost, reason)
}

// endedError is the error of Unlock or Extend on an ended hold.
func (h *Hold) endedError(op string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	err, reason := h.err, h.reason
	if err == nil {
		err, reason = ErrLost, "its deadline passed"
	}
	select {
	case <-h.c.done:
		// Close ended it, or would have: the error says so, for errors.Is(err, ErrClosed).
		return fmt.Errorf("dlock: %s %q: %w: %w (%s; %w)", op, h.t.name, Inner(ErrNotHeld), Inner(err), reason, Inner(ErrClosed))
	default:
	}
	return fmt.Errorf("dlock: %s %q: %w: %w (%s)", op, h.t.name, Inner(ErrNotHeld), Inner(err), reason)
}

// bind makes h's outer lease, whose context (see context) keeps the values of lockCtx
// (the ctx given to Lock), not its cancellation.
func (h *Hold) bind(lockCtx context.Context) {
	parent, _ := lockCtx.Value(leaseKey{}).(*leaseChain)
	h.values = leaseValues{lock: lockCtx, chain: leaseChain{lease: h.outer, parent: parent}}
	h.outer.h, h.outer.outer = h, true
}

// context returns the outer lease's context, which ends when h ends, with h's error as
// its cause. It is made on first use; made after h ended, it is cancelled already.
func (h *Hold) context() context.Context {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.ctx == nil {
		h.ctx, h.cancel = context.WithCancelCause(&h.values)
		if h.err != nil {
			h.cancel(h.err)
		}
	}
	return h.ctx
}

// startExtend numbers an Extend to ttl about to be sent. One that shortens the lease takes
// effect now, here only: see the comment on hold's fields.
func (h *Hold) startExtend(ttl time.Duration) (seq uint64, err error) {
	h.mu.Lock()
	if h.releasing {
		h.mu.Unlock()
		return 0, fmt.Errorf("dlock: extend %q: %w (an Unlock of this lease is in progress)", h.t.name, Inner(ErrNotHeld))
	}
	h.sent++
	seq = h.sent
	if ttl >= h.ttl {
		h.mu.Unlock()
		return seq, nil
	}
	h.cut, h.ttl, h.ttlSeq = seq, ttl, seq
	deadline := quorum.Deadline(time.Now(), ttl, h.c.cfg.DriftFactor)
	moved := deadline.Before(h.deadline)
	if moved {
		h.deadline = deadline
	}
	h.mu.Unlock()
	if moved {
		h.c.sched.Shorten(&h.entry, deadline)
	}
	return seq, nil
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
		renewAt = start.Add(RenewalInterval(ttl))
	}
	h.c.sched.Renewed(&h.entry, renewAt, deadline)
	return true
}

// handOn ends h by handing it to a successor in this process that pick makes, unless h may
// hand off no more (no token left in its block), the lease does not renew, or it has less
// than a third of its length left (a renewed lease always has two thirds; a granted one,
// whose first length is at most grantLength, too until its first renewal): then its
// renewals are failing, the successor would inherit a lease about to be lost, and a
// release through Redis tells it the truth. pick returns nil when there is no one to hand
// to. It reports whether h was handed on.
func (h *Hold) handOn(pick func(ttl time.Duration, deadline time.Time) *Hold) bool {
	if h.spare == 0 || !h.t.cfg.Renew {
		// A NoRenew lease lasts its TTL from its acquisition: a successor would inherit
		// only what is left of it.
		return false
	}
	h.mu.Lock()
	ttl, deadline := h.ttl, h.deadline
	h.mu.Unlock()
	if time.Until(deadline) < min(ttl, grantLength)/3 {
		return false
	}
	next := pick(ttl, deadline)
	if next == nil {
		return false
	}
	// Renewed like h would have been: its last renewal started about ttl before the
	// deadline, and the next is due a third of the way. If the scheduler has stopped,
	// Close is under way and releases next with every other hold.
	c := h.c
	if c.sched.Add(&next.entry, deadline.Add(-2*ttl/3), ttl/6, deadline) && next.ended() {
		c.sched.Remove(&next.entry) // already unlocked by the waiter it was handed to
	}
	h.end(ErrReleased, "unlocked; handed to the next waiter in this process")
	return true
}

// release ends the hold by Unlock: compare-and-delete on every node, which also wakes the
// waiters. It succeeds if a majority released the key or no longer had it, at least one
// of them released it. The hold has ended when release returns, whatever the result.
func (h *Hold) release(ctx context.Context) error {
	h.mu.Lock()
	switch {
	case h.err == nil && !time.Now().Before(h.deadline):
		h.mu.Unlock()
		h.end(ErrLost, reasonExpired)
		return h.endedError("unlock")
	case h.err != nil:
		h.mu.Unlock()
		return h.endedError("unlock")
	case h.releasing:
		h.mu.Unlock()
		return fmt.Errorf("dlock: unlock %q: %w (another Unlock of this lease is in progress)", h.t.name, Inner(ErrNotHeld))
	}
	h.releasing = true
	ttl := h.ttl
	h.mu.Unlock()
	// Back to the sharing (a Mutex's hotKey): the next local waiter takes the hold without a
	// round trip.
	if h.t.share.handOff(h) {
		return nil
	}

	c := h.c
	// The per-node timeout follows the lock's TTL option, not a length an Extend set: a
	// lease shortened to expire soon is still worth releasing on a slow server.
	wait := max(ttl, h.t.cfg.TTL)
	if ctx.Err() != nil {
		// An Unlock deferred with a context that has ended since (a request's, say) still
		// releases: leaving the key to expire would keep everyone out for a whole TTL.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), nodeTimeout(c, wait))
		defer cancel()
	}
	n, need := len(c.nodes), h.t.scheme.need(len(c.nodes))
	v := poll(ctx, c, h.t.parts, nil, wait,
		func(p *Target, call *batch.Call) {
			p.scheme.release(p, h.token, c.nodes[call.Node].PublishCommand(), call)
		},
		func(v *votes) bool { return v.releaseSettled(n, need) })
	defer v.recycle()
	released, gone := v.yes, v.no
	switch {
	case released > 0 && released+gone >= need:
		h.end(ErrReleased, "unlocked")
		return nil
	case gone >= need:
		h.end(ErrLost, "the key no longer held its token when Unlock ran (expired, deleted or taken)")
		return h.endedError("unlock")
	}
	h.end(ErrReleased, "unlock failed; the key expires by itself")
	err := c.pub.Error(Shortfall{Op: "unlock", Name: h.t.name, Agreed: released + gone, Needed: need, Total: n, Nodes: probeSilent(v.problems(c.nodes))})
	return fmt.Errorf("%w; the lease has ended here and its key expires by itself within %v", err, ttl)
}

// extend makes the lease last ttl from now on a majority, and ttl the length of later
// renewals. An Extend that lengthens leaves the hold unchanged on failure. One that
// shortens takes effect when it is sent, on this side only: the deadline moves down and
// later renewals use ttl, even if it fails, while Redis keeps the key's longer expiry
// (the extend scripts never shorten a key, so that one landing late cannot cut a lease
// that a later call lengthened). Either way, a majority that says the key is no longer
// ours ends the hold.
func (h *Hold) extend(ctx context.Context, ttl time.Duration) error {
	c := h.c
	n, need := len(c.nodes), h.t.scheme.need(len(c.nodes))
	ttlArg := ms(ttl.Milliseconds())
	seq, err := h.startExtend(ttl)
	if err != nil {
		return err
	}
	var owners []*batch.Call // a longer lease keeps its owner's label as long
	if namesOwner(h.token) {
		owners = c.announce(ttl)
	}
	v := poll(ctx, c, h.t.parts, nil, ttl,
		func(p *Target, call *batch.Call) { p.scheme.extend(p, h.token, ttlArg, call); ownerWrite(owners, call) },
		func(v *votes) bool { return v.yes >= need || v.no > n-need })
	deadline := quorum.Deadline(v.start, ttl, c.cfg.DriftFactor)
	switch {
	case v.yes >= need && time.Now().Before(deadline):
		h.setTTL(seq, ttl)
		if !h.renewed(seq, v.start, deadline) && h.state() != nil {
			return h.endedError("extend") // its deadline passed while the Extend was out
		}
		return nil
	case v.no > n-need:
		if !h.lost("Extend found the key no longer holds its token (expired, deleted or taken)") && !h.ended() {
			return fmt.Errorf("dlock: extend %q: %w (an Unlock of this lease is in progress)", h.t.name, Inner(ErrNotHeld))
		}
		return h.endedError("extend")
	}
	return c.pub.Error(Shortfall{Op: "extend", Name: h.t.name, Agreed: v.yes, Needed: need, Total: n, Nodes: probeSilent(v.problems(c.nodes))})
}
