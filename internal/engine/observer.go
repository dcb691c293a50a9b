package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/observe"
)

// The observers (observe.Observer, ClientConfig.Observers) are called synchronously, in
// order, on the goroutine doing the work, and only when there are any (Client.observed):
// with none, an event is never built. A nil field of an observer is never called.
//
// Every event is built and sent by the functions of this file; the engine's steps call
// them in one line each, and each returns at once when the Client has no observer.
// The events of one hold are sent in order under its holdObs's mutex: a hold's WaitEnded
// first (the events of a hold that happen before its Lock call has returned wait for it),
// then its renewals, then its end.

// reasonExpired is why a hold whose deadline passed ended: the one reason that makes a
// loss observe.LossExpired.
const reasonExpired = "its deadline passed without a successful renewal"

// observed reports whether c has observers: the one check on the path of a Lock.
func (c *Client) observed() bool { return len(c.cfg.Observers) > 0 }

// Waits and attempts.

// observedLock is acquire told to c's observers: WaitStarted, then the attempts, then
// WaitEnded, which delivers a lease's hold (announce).
func (r *request) observedLock(ctx context.Context) (*Lease, error) {
	t, c := r.t, r.t.c
	name, kind := t.name, t.scheme.kind()
	obs := c.cfg.Observers
	for i := range obs {
		if f := obs[i].WaitStarted; f != nil {
			f(observe.WaitStart{Context: ctx, Name: name, Kind: kind})
		}
	}
	start := time.Now()
	lease, err := r.acquire(ctx)
	ev := observe.WaitEnd{Context: ctx, Name: name, Kind: kind, Waited: time.Since(start), Attempts: r.attempts, Err: err}
	if lease == nil {
		waitEnded(obs, ev)
		return lease, err
	}
	ev.Token = lease.h.fence
	lease.h.obs.announce(obs, ev)
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
	ev := observe.Attempt{Context: lockCtx, Name: r.t.name, Kind: r.t.scheme.kind(), Verdict: publicVerdict(vd, a), Duration: time.Since(v.start), Err: a.err}
	if ev.Err == nil {
		ev.Err = nodeTrouble(c, v, r.t.name, r.t.scheme.need(len(c.nodes)))
	}
	obs := c.cfg.Observers
	for i := range obs {
		if f := obs[i].Attempted; f != nil {
			f(ev)
		}
	}
	return a
}

// publicVerdict is the observers' name for vd. A majority that granted but did not
// confirm the fencing token made no hold: that attempt failed.
func publicVerdict(vd verdict, a attempt) observe.Verdict {
	switch {
	case vd == acquired && a.h != nil:
		return observe.VerdictAcquired
	case vd == late:
		return observe.VerdictLate
	case vd == held:
		return observe.VerdictHeld
	case vd == split:
		return observe.VerdictSplit
	}
	return observe.VerdictFailed
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
	pending   []any     // guarded by mu: the HoldEnd and Renewal events that wait for announced
	failures  int       // guarded by mu: renewals failed in a row
}

// newHoldObs returns the observers' side of a new hold, or nil when c has no observers.
func (c *Client) newHoldObs() *holdObs {
	if !c.observed() {
		return nil
	}
	return &holdObs{since: time.Now()}
}

// announce sends ev, the WaitEnded that delivers the hold, then the hold's events that
// happened before it.
func (o *holdObs) announce(obs []observe.Observer, ev observe.WaitEnd) {
	o.mu.Lock()
	defer o.mu.Unlock()
	waitEnded(obs, ev)
	o.announced = true
	for _, p := range o.pending {
		switch e := p.(type) {
		case observe.HoldEnd:
			o.endLocked(obs, e)
		case observe.Renewal:
			o.renewalLocked(obs, e)
		}
	}
	o.pending = nil
}

// waitEnded sends ev, the end of a Lock call.
func waitEnded(obs []observe.Observer, ev observe.WaitEnd) {
	for i := range obs {
		if f := obs[i].WaitEnded; f != nil {
			f(ev)
		}
	}
}

// endLocked sends ev now, or after the hold's WaitEnded if that is still to come; so
// does renewalLocked. The caller holds o.mu. An event is boxed only to wait (pending):
// sent at once, it costs no allocation.
func (o *holdObs) endLocked(obs []observe.Observer, ev observe.HoldEnd) {
	if !o.announced {
		o.pending = append(o.pending, ev)
		return
	}
	for i := range obs {
		if f := obs[i].HoldEnded; f != nil {
			f(ev)
		}
	}
}

func (o *holdObs) renewalLocked(obs []observe.Observer, ev observe.Renewal) {
	if !o.announced {
		o.pending = append(o.pending, ev)
		return
	}
	for i := range obs {
		if f := obs[i].Renewal; f != nil {
			f(ev)
		}
	}
}

// reportEnd tells the observers that h ended with err, for reason (see Hold.end).
func (h *Hold) reportEnd(err error, reason string) {
	o := h.obs
	if o == nil {
		return
	}
	cause := observe.NotLost
	switch {
	case err == ErrLost && reason == reasonExpired:
		cause = observe.LossExpired
	case err == ErrLost:
		cause = observe.LossTaken
	}
	ev := observe.HoldEnd{Context: h.ctx, Name: h.t.name, Kind: h.t.scheme.kind(), Token: h.fence, Held: time.Since(o.since), Err: err, Cause: cause, Reason: reason}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.endLocked(h.c.cfg.Observers, ev)
}

// handedOff tells the observers that h, if not nil, was handed to the caller: by a
// goroutine of this process (local), or granted by a release in Redis (once the hold has
// started: Hold.startGranted). It runs on the receiver's goroutine, before its WaitEnded.
// It returns h.
func handedOff(h *Hold, local bool) *Hold {
	if h == nil || h.obs == nil {
		return h
	}
	ev := observe.HandOff{Name: h.t.name, Kind: h.t.scheme.kind(), Token: h.fence, Local: local}
	obs := h.c.cfg.Observers
	for i := range obs {
		if f := obs[i].HandedOff; f != nil {
			f(ev)
		}
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
	ev := observe.Renewal{Name: h.t.name, Kind: h.t.scheme.kind(), Token: h.fence, Failures: o.failures, Left: time.Until(h.validUntil())}
	ev.Err = renewalError(h, ok, at)
	o.renewalLocked(h.c.cfg.Observers, ev)
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
	ev := observe.Renewal{Name: h.t.name, Kind: h.t.scheme.kind(), Token: h.fence, Recovered: true, Failures: o.failures, Left: time.Until(h.validUntil())}
	o.failures = 0
	o.renewalLocked(h.c.cfg.Observers, ev)
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
	for i := range n.observers {
		if f := n.observers[i].NodeSilent; f != nil {
			f(observe.NodeSilence{Addr: n.Name})
		}
	}
}
