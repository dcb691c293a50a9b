package engine

import (
	"context"
	"sync"
	"time"
)

// An Observer is told what the engine does; the public package turns each report into its
// public event (dlock.Observer). The engine calls its observers synchronously, in order,
// on the goroutine doing the work, and only when there are any (Client.observed): with
// none, a report is never built.
//
// Every report is built and sent by the functions of this file; the engine's steps call
// them in one line each, and each returns at once when the Client has no observer.
// The events of one hold are sent in order under its holdObs's mutex: a hold's WaitEnded
// first (the events of a hold that happen before its Lock call has returned wait for it),
// then its renewals, then its end.
type Observer interface {
	WaitStarted(ctx context.Context, name, kind string)
	Attempted(AttemptReport)
	WaitEnded(WaitReport)
	HoldEnded(HoldReport)
	Renewal(RenewalReport)
	HandedOff(HandOffReport)
	NodeSilent(addr string)
}

// Verdict values as the public package numbers them (dlock.Verdict).
const (
	VerdictAcquired = iota
	VerdictHeld
	VerdictSplit
	VerdictLate
	VerdictFailed
)

// Loss causes as the public package numbers them (dlock.LossCause).
const (
	NotLost = iota
	LossExpired
	LossTaken
)

// AttemptReport is one attempt and its verdict (dlock.Attempt).
type AttemptReport struct {
	Ctx        context.Context
	Name, Kind string
	Verdict    int
	Duration   time.Duration
	Err        error
}

// WaitReport is the end of a Lock, TryLock or Acquire call (dlock.WaitEnd).
type WaitReport struct {
	Ctx        context.Context
	Name, Kind string
	Waited     time.Duration
	Attempts   int
	Token      uint64
	Err        error
}

// HoldReport is the end of a hold (dlock.HoldEnd).
type HoldReport struct {
	Ctx        context.Context
	Name, Kind string
	Token      uint64
	Held       time.Duration
	Err        error
	Cause      int
	Reason     string
}

// RenewalReport is a failed renewal, or the first success after failures (dlock.Renewal).
type RenewalReport struct {
	Name, Kind string
	Token      uint64
	Err        error
	Recovered  bool
	Failures   int
	Left       time.Duration
}

// HandOffReport is a lock passed to a waiter without its own attempt (dlock.HandOff).
type HandOffReport struct {
	Name, Kind string
	Token      uint64
	Local      bool
}

// observed reports whether c has observers: the one check on the path of a Lock.
func observed(c *Client) bool { return len(c.cfg.Observers) > 0 }

// Waits and attempts.

// waitStarted tells c's observers that a Lock call began, and returns when.
func waitStarted(c *Client, ctx context.Context, name, kind string) time.Time {
	for _, o := range c.cfg.Observers {
		o.WaitStarted(ctx, name, kind)
	}
	return time.Now()
}

// waitEnded tells c's observers that a Lock call that began at start ended after attempts
// attempts, with the hold h it delivered (nil for none) or err. A hold's WaitEnded is sent
// under its holdObs's mutex, then the hold's events that happened before it (announce).
func waitEnded(c *Client, ctx context.Context, name, kind string, start time.Time, attempts int, h *Hold, err error) {
	rep := WaitReport{Ctx: ctx, Name: name, Kind: kind, Waited: time.Since(start), Attempts: attempts, Err: err}
	if h == nil {
		for _, o := range c.cfg.Observers {
			o.WaitEnded(rep)
		}
		return
	}
	rep.Token = h.fence
	h.obs.announce(c.cfg.Observers, rep)
}

// attempted counts the attempt a of r, judged vd from the votes v, tells the observers,
// and returns a.
func attempted(lockCtx context.Context, r *request, a attempt, v *votes, vd verdict) attempt {
	r.attempts++
	t, c := r.t, r.t.c
	if !observed(c) {
		return a
	}
	rep := AttemptReport{Ctx: lockCtx, Name: t.name, Kind: t.scheme.kind(), Verdict: publicVerdict(vd, a), Duration: time.Since(v.start), Err: a.err}
	if rep.Err == nil {
		rep.Err = nodeTrouble(c, v, t.name, t.scheme.need(len(c.nodes)))
	}
	for _, o := range c.cfg.Observers {
		o.Attempted(rep)
	}
	return a
}

// publicVerdict numbers vd as the public package does. A majority that granted but did not
// confirm the fencing token made no hold: that attempt failed.
func publicVerdict(vd verdict, a attempt) int {
	switch {
	case vd == acquired && a.h != nil:
		return VerdictAcquired
	case vd == late:
		return VerdictLate
	case vd == held:
		return VerdictHeld
	case vd == split:
		return VerdictSplit
	}
	return VerdictFailed
}

// nodeTrouble is the error of the nodes that failed or did not answer an attempt that
// reached a verdict anyway (on a quorum); nil when every node answered.
func nodeTrouble(c *Client, v *votes, name string, need int) error {
	nodes := v.problems(c.nodes)
	if len(nodes) == 0 {
		return nil
	}
	return c.pub.Error(Shortfall{Op: "lock", Name: name, Agreed: v.yes, Needed: need, Total: len(c.nodes), Nodes: nodes})
}

// Holds.

// holdObs is a hold's side of the observers: nil for a Client with none. Its mutex orders
// the hold's events: they are sent while it is held, so a renewal's event and the hold's
// end, sent from different goroutines, arrive in the order they happened, and none before
// the WaitEnded that delivered the hold (announced).
type holdObs struct {
	obs       []Observer
	mu        sync.Mutex
	since     time.Time // when the hold was acquired, granted or handed over; set once
	announced bool      // guarded by mu: its WaitEnded was sent; later events are sent at once
	ended     bool      // guarded by mu: its HoldEnded was sent, or is waiting in pending
	pending   []any     // guarded by mu: the HoldReport and RenewalReports that wait for announced
	failures  int       // guarded by mu: renewals failed in a row
}

// newHoldObs returns the observers' side of a new hold of c, or nil when c has none.
func newHoldObs(c *Client) *holdObs {
	if !observed(c) {
		return nil
	}
	return &holdObs{obs: c.cfg.Observers, since: time.Now()}
}

// announce sends rep, the WaitEnded that delivers the hold, then the hold's events that
// happened before it.
func (o *holdObs) announce(obs []Observer, rep WaitReport) {
	o.mu.Lock()
	defer o.mu.Unlock()
	for _, x := range obs {
		x.WaitEnded(rep)
	}
	o.announced = true
	for _, p := range o.pending {
		switch r := p.(type) {
		case HoldReport:
			o.endLocked(r)
		case RenewalReport:
			o.renewalLocked(r)
		}
	}
	o.pending = nil
}

// endLocked sends rep now, or after the hold's WaitEnded if that is still to come; so
// does renewalLocked. The caller holds o.mu. A report is boxed only to wait (pending):
// sent at once, it costs no allocation.
func (o *holdObs) endLocked(rep HoldReport) {
	if !o.announced {
		o.pending = append(o.pending, rep)
		return
	}
	for _, x := range o.obs {
		x.HoldEnded(rep)
	}
}

func (o *holdObs) renewalLocked(rep RenewalReport) {
	if !o.announced {
		o.pending = append(o.pending, rep)
		return
	}
	for _, x := range o.obs {
		x.Renewal(rep)
	}
}

// reportEnd tells the observers that a hold ended with err, for reason (see Hold.end).
func reportEnd(o *holdObs, ctx context.Context, name, kind string, token uint64, err error, reason string) {
	if o == nil {
		return
	}
	cause := NotLost
	switch {
	case err == ErrLost && reason == reasonExpired:
		cause = LossExpired
	case err == ErrLost:
		cause = LossTaken
	}
	rep := HoldReport{Ctx: ctx, Name: name, Kind: kind, Token: token, Held: time.Since(o.since), Err: err, Cause: cause, Reason: reason}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = true
	o.endLocked(rep)
}

// renewal tells the observers of a renewal of a hold that has not ended (its end was, or
// is about to be, sent instead): with err, one more failure; without, a recovery, if it
// had failed. left is the time the hold has left.
func (o *holdObs) renewal(name, kind string, token uint64, left time.Duration, err error) {
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.ended || (err == nil && o.failures == 0) {
		return
	}
	rep := RenewalReport{Name: name, Kind: kind, Token: token, Err: err, Left: left}
	if err == nil {
		rep.Recovered, rep.Failures, o.failures = true, o.failures, 0
	} else {
		o.failures++
		rep.Failures = o.failures
	}
	o.renewalLocked(rep)
}

// handedOff tells the observers that h, if not nil, was handed to the caller: by a
// goroutine of this process (local), or granted by a release in Redis (once the hold has
// started: Hold.startGranted). It runs on the receiver's goroutine, before its WaitEnded.
// It returns h.
func handedOff(h *Hold, local bool) *Hold {
	if h == nil || h.obs == nil {
		return h
	}
	rep := HandOffReport{Name: h.t.name, Kind: h.t.scheme.kind(), Token: h.fence, Local: local}
	for _, o := range h.obs.obs {
		o.HandedOff(rep)
	}
	return h
}

// nodeSilent tells observers that the node at addr has just become silent (Node.missed).
func nodeSilent(observers []Observer, addr string) {
	for _, o := range observers {
		o.NodeSilent(addr)
	}
}
