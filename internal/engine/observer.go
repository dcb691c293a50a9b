package engine

import (
	"context"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock/observe"
)

// The observers (observe.Observer, ClientConfig.Observers) are called synchronously, in
// order, on the goroutine doing the work, and only when there are any (observed): with
// none, an event is never built. A nil field of an observer is never called.
//
// Every event is built and sent by the functions of this file; the engine's steps call
// them in one line each, and each returns at once when the Client has no observer.
// The events of one hold are sent in order under its holdObs's mutex: a hold's WaitEnded
// first (the events of a hold that happen before its Lock call has returned wait for it),
// then its renewals, then its end.

// observed reports whether c has observers: the one check on the path of a Lock.
func observed(c *Client) bool { return len(c.cfg.Observers) > 0 }

// Waits and attempts.

// waitStarted tells c's observers that a Lock call began, and returns when.
func waitStarted(c *Client, ctx context.Context, name, kind string) time.Time {
	for _, o := range c.cfg.Observers {
		if f := o.WaitStarted; f != nil {
			f(observe.WaitStart{Context: ctx, Name: name, Kind: kind, Owner: c.cfg.Owner})
		}
	}
	return time.Now()
}

// waitEnded tells c's observers that a Lock call that began at start ended after attempts
// attempts, with the hold h it delivered (nil for none) or err. A hold's WaitEnded is sent
// under its holdObs's mutex, then the hold's events that happened before it (announce).
func waitEnded(c *Client, ctx context.Context, name, kind string, start time.Time, attempts int, h *Hold, err error) {
	ev := observe.WaitEnd{Context: ctx, Name: name, Kind: kind, Owner: c.cfg.Owner, Waited: time.Since(start), Attempts: attempts, Err: err}
	if h == nil {
		sendWaitEnd(c.cfg.Observers, ev)
		return
	}
	ev.Token = h.fence
	h.obs.announce(ev)
}

// sendWaitEnd sends ev, the end of a Lock call.
func sendWaitEnd(obs []observe.Observer, ev observe.WaitEnd) {
	for _, o := range obs {
		if f := o.WaitEnded; f != nil {
			f(ev)
		}
	}
}

// attempted counts the attempt a of r, judged vd from the votes v, tells the observers,
// and returns a.
func attempted(lockCtx context.Context, r *request, a attempt, v *votes, vd verdict) attempt {
	r.attempts++
	t, c := r.t, r.t.c
	if !observed(c) {
		return a
	}
	ev := observe.Attempt{Context: lockCtx, Name: t.name, Kind: t.scheme.kind(), Owner: t.c.cfg.Owner, Verdict: publicVerdict(vd, a), Duration: time.Since(v.start), Err: a.err}
	if ev.Err == nil {
		ev.Err = nodeTrouble(c, v, t.name, t.scheme.need(len(c.nodes)))
	}
	for _, o := range c.cfg.Observers {
		if f := o.Attempted; f != nil {
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
	obs       []observe.Observer
	owner     string // the Client's owner name, which every event carries
	mu        sync.Mutex
	since     time.Time // when the hold was acquired, granted or handed over; set once
	announced bool      // guarded by mu: its WaitEnded was sent; later events are sent at once
	ended     bool      // guarded by mu: its HoldEnded was sent, or is waiting in pending
	pending   []any     // guarded by mu: the HoldEnd and Renewal events that wait for announced
	failures  int       // guarded by mu: renewals failed in a row
}

// newHoldObs returns the observers' side of a new hold of c, or nil when c has none.
func newHoldObs(c *Client) *holdObs {
	if !observed(c) {
		return nil
	}
	return &holdObs{obs: c.cfg.Observers, owner: c.cfg.Owner, since: time.Now()}
}

// announce sends ev, the WaitEnded that delivers the hold, then the hold's events that
// happened before it.
func (o *holdObs) announce(ev observe.WaitEnd) {
	o.mu.Lock()
	defer o.mu.Unlock()
	sendWaitEnd(o.obs, ev)
	o.announced = true
	for _, p := range o.pending {
		switch e := p.(type) {
		case observe.HoldEnd:
			o.endLocked(e)
		case observe.Renewal:
			o.renewalLocked(e)
		}
	}
	o.pending = nil
}

// endLocked sends ev now, or after the hold's WaitEnded if that is still to come; so
// does renewalLocked. The caller holds o.mu. An event is boxed only to wait (pending):
// sent at once, it costs no allocation.
func (o *holdObs) endLocked(ev observe.HoldEnd) {
	if !o.announced {
		o.pending = append(o.pending, ev)
		return
	}
	for _, x := range o.obs {
		if f := x.HoldEnded; f != nil {
			f(ev)
		}
	}
}

func (o *holdObs) renewalLocked(ev observe.Renewal) {
	if !o.announced {
		o.pending = append(o.pending, ev)
		return
	}
	for _, x := range o.obs {
		if f := x.Renewal; f != nil {
			f(ev)
		}
	}
}

// reportEnd tells the observers o (not nil: Hold.end does not make the lease's context
// for no one) that a hold ended with err, for reason.
func reportEnd(o *holdObs, ctx context.Context, name, kind string, token uint64, err error, reason string) {
	cause := observe.NotLost
	switch {
	case err == ErrLost && reason == reasonExpired:
		cause = observe.LossExpired
	case err == ErrLost:
		cause = observe.LossTaken
	}
	ev := observe.HoldEnd{Context: ctx, Name: name, Kind: kind, Owner: o.owner, Token: token, Held: time.Since(o.since), Err: err, Cause: cause, Reason: reason}
	o.mu.Lock()
	defer o.mu.Unlock()
	o.ended = true
	o.endLocked(ev)
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
	ev := observe.Renewal{Name: name, Kind: kind, Owner: o.owner, Token: token, Err: err, Left: left}
	if err == nil {
		ev.Recovered, ev.Failures, o.failures = true, o.failures, 0
	} else {
		o.failures++
		ev.Failures = o.failures
	}
	o.renewalLocked(ev)
}

// handedOff tells the observers that h, if not nil, was handed to the caller: by a
// goroutine of this process (local), or granted by a release in Redis (once the hold has
// started: Hold.startGranted). It runs on the receiver's goroutine, before its WaitEnded.
// It returns h.
func handedOff(h *Hold, local bool) *Hold {
	if h == nil || h.obs == nil {
		return h
	}
	ev := observe.HandOff{Name: h.t.name, Kind: h.t.scheme.kind(), Owner: h.obs.owner, Token: h.fence, Local: local}
	for _, o := range h.obs.obs {
		if f := o.HandedOff; f != nil {
			f(ev)
		}
	}
	return h
}

// nodeSilent tells observers that the node at addr has just become silent (Node.missed).
func nodeSilent(observers []observe.Observer, addr string) {
	for _, o := range observers {
		if f := o.NodeSilent; f != nil {
			f(observe.NodeSilence{Addr: addr})
		}
	}
}
