package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
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

// reasonExpired is why a hold whose deadline passed ended: the one reason that makes a
// loss LossExpired.
const reasonExpired = "its deadline passed without a successful renewal"

// observed reports whether c has observers: the one check on the path of a Lock.
func (c *Client) observed() bool { return len(c.cfg.Observers) > 0 }

// Waits and attempts.

// observedLock is acquire told to c's observers: WaitStarted, then the attempts, then
// WaitEnded, which delivers a lease's hold (announce).
func (r *request) observedLock(ctx context.Context) (*Lease, error) {
	t, c := r.t, r.t.c
	name, kind := t.name, t.scheme.kind()
	for _, o := range c.cfg.Observers {
		o.WaitStarted(ctx, name, kind)
	}
	start := time.Now()
	lease, err := r.acquire(ctx)
	rep := WaitReport{Ctx: ctx, Name: name, Kind: kind, Waited: time.Since(start), Attempts: r.attempts, Err: err}
	if lease == nil {
		for _, o := range c.cfg.Observers {
			o.WaitEnded(rep)
		}
		return lease, err
	}
	rep.Token = lease.h.fence
	lease.h.obs.announce(c.cfg.Observers, rep)
	return lease, err
}

// attempted counts the attempt a, judged vd from the votes v, tells the observers, and
// returns a.
func (r *request) attempted(lockCtx context.Context, a attempt, v *votes, vd verdict) attempt {
	r.attempts++
	c := r.t.c
	if !c.observed() {
		return a
	}
	rep := AttemptReport{Ctx: lockCtx, Name: r.t.name, Kind: r.t.scheme.kind(), Verdict: publicVerdict(vd, a), Duration: time.Since(v.start), Err: a.err}
	if rep.Err == nil {
		rep.Err = nodeTrouble(c, v, r.t.name, r.t.scheme.need(len(c.nodes)))
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
	nodes := v.problems(c)
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
	mu        sync.Mutex
	since     time.Time // when the hold was acquired, granted or handed over; set once
	announced bool      // guarded by mu: its WaitEnded was sent; later events are sent at once
	pending   []any     // guarded by mu: the HoldReport and RenewalReports that wait for announced
	failures  int       // guarded by mu: renewals failed in a row
}

// newHoldObs returns the observers' side of a new hold, or nil when c has no observers.
func (c *Client) newHoldObs() *holdObs {
	if !c.observed() {
		return nil
	}
	return &holdObs{since: time.Now()}
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
			o.endLocked(obs, r)
		case RenewalReport:
			o.renewalLocked(obs, r)
		}
	}
	o.pending = nil
}

// endLocked sends rep now, or after the hold's WaitEnded if that is still to come; so
// does renewalLocked. The caller holds o.mu. A report is boxed only to wait (pending):
// sent at once, it costs no allocation.
func (o *holdObs) endLocked(obs []Observer, rep HoldReport) {
	if !o.announced {
		o.pending = append(o.pending, rep)
		return
	}
	for _, x := range obs {
		x.HoldEnded(rep)
	}
}

func (o *holdObs) renewalLocked(obs []Observer, rep RenewalReport) {
	if !o.announced {
		o.pending = append(o.pending, rep)
		return
	}
	for _, x := range obs {
		x.Renewal(rep)
	}
}

// reportEnd tells the observers that h ended with err, for reason (see Hold.end).
func (h *Hold) reportEnd(err error, reason string) {
	o := h.obs
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
	rep := HoldReport{Ctx: h.ctx, Name: h.t.name, Kind: h.t.scheme.kind(), Token: h.fence, Held: time.Since(o.since), Err: err, Cause: cause, Reason: reason}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.endLocked(h.c.cfg.Observers, rep)
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
	for _, o := range h.c.cfg.Observers {
		o.HandedOff(rep)
	}
	return h
}

// Renewals.

// renewReplies locates one hold's replies in a renewal batch (renewals.send): its outcome
// (renewals.apply), and the error of its failed renewal for the observers.
type renewReplies struct {
	calls    [][]*batch.Call
	answered []bool
	i        int
}

// renewalFailed counts a failed renewal of h, which ok nodes confirmed, and tells the
// observers, unless h has ended (its end was, or is about to be, sent instead).
func (h *Hold) renewalFailed(ok int, at renewReplies) {
	o := h.obs
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if h.ended() {
		return
	}
	o.failures++
	rep := RenewalReport{Name: h.t.name, Kind: h.t.scheme.kind(), Token: h.fence, Failures: o.failures, Left: time.Until(h.validUntil())}
	rep.Err = renewalError(h, ok, at)
	o.renewalLocked(h.c.cfg.Observers, rep)
}

// renewalSucceeded tells the observers that h was renewed after failures, if it had
// failed and still holds.
func (h *Hold) renewalSucceeded() {
	o := h.obs
	if o == nil {
		return
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.failures == 0 || h.state() != nil {
		return
	}
	rep := RenewalReport{Name: h.t.name, Kind: h.t.scheme.kind(), Token: h.fence, Recovered: true, Failures: o.failures, Left: time.Until(h.validUntil())}
	o.failures = 0
	o.renewalLocked(h.c.cfg.Observers, rep)
}

// renewalError says why h's renewal failed: the nodes that failed or did not answer, or,
// when enough confirmed it, that they did so after its deadline.
func renewalError(h *Hold, ok int, at renewReplies) error {
	c := h.c
	var nodes []Failure
	for node, calls := range at.calls {
		switch {
		case !at.answered[node]:
			nodes = append(nodes, Failure{Addr: c.nodes[node].Name, Err: errNoAnswer})
		case calls[at.i].Err != nil:
			nodes = append(nodes, Failure{Addr: c.nodes[node].Name, Err: calls[at.i].Err})
		}
	}
	need := h.t.scheme.need(len(c.nodes))
	if len(nodes) == 0 && ok >= need {
		return fmt.Errorf("dlock: renew %q: confirmed too late: the lease's deadline had passed", h.t.name)
	}
	return c.pub.Error(Shortfall{Op: "renew", Name: h.t.name, Agreed: ok, Needed: need, Total: len(c.nodes), Nodes: nodes})
}

// errNoAnswer is the failure of a node that did not answer a renewal in time.
var errNoAnswer = errors.New("no answer in time (down, unreachable, hung or slow)")

// Nodes.

// silenced tells the observers that n has just become silent (Node.missed).
func (n *Node) silenced() {
	for _, o := range n.observers {
		o.NodeSilent(n.Name)
	}
}
