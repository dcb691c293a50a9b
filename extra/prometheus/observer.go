package dlockprom

import (
	"context"
	"errors"

	"github.com/seed51c676c8/dlock"
)

// Observer returns the dlock.Observer that feeds c: give it to dlock.WithObserver. Every
// call returns an equivalent Observer. Its functions only update metrics: they never
// block, and allocate nothing once the series of the event's name label, kind and owner
// label exist (the first event of each makes them).
func (c *Collector) Observer() dlock.Observer {
	return dlock.Observer{
		WaitStarted: c.waitStarted,
		Attempted:   c.attempted,
		WaitEnded:   c.waitEnded,
		HoldEnded:   c.holdEnded,
		Renewal:     c.renewal,
		HandedOff:   c.handedOff,
		NodeSilent:  c.nodeSilent,
	}
}

func (c *Collector) waitStarted(e dlock.WaitStart) {
	c.labels.get(e.Name, e.Kind, e.Owner).waiters.Inc()
}

func (c *Collector) attempted(e dlock.Attempt) {
	c.labels.get(e.Name, e.Kind, e.Owner).attempt(&c.m, e.Verdict).Inc()
}

// waitEnded counts the call's outcome. An acquisition starts a hold, which HoldEnded ends.
func (c *Collector) waitEnded(e dlock.WaitEnd) {
	s := c.labels.get(e.Name, e.Kind, e.Owner)
	s.waiters.Dec()
	s.wait.Observe(e.Waited.Seconds())
	switch {
	case e.Err == nil:
		s.acquisitions.Inc()
		s.held.Inc()
	case errors.Is(e.Err, dlock.ErrNotAcquired):
		s.refusals.Inc()
	default:
		s.giveUps[giveUpReason(e.Err)].Inc()
	}
}

// giveUpReason returns the index in reasons of why a wait ended with err.
func giveUpReason(err error) int {
	switch {
	case errors.Is(err, context.Canceled):
		return 0
	case errors.Is(err, context.DeadlineExceeded):
		return 1
	case errors.Is(err, dlock.ErrClosed):
		return 2
	}
	return 3
}

func (c *Collector) holdEnded(e dlock.HoldEnd) {
	s := c.labels.get(e.Name, e.Kind, e.Owner)
	s.held.Dec()
	s.hold.Observe(e.Held.Seconds())
	if e.Cause != dlock.NotLost {
		s.loss(&c.m, e.Cause).Inc()
	}
}

func (c *Collector) renewal(e dlock.Renewal) {
	s := c.labels.get(e.Name, e.Kind, e.Owner)
	if e.Recovered {
		s.renewalOKs.Inc()
	} else {
		s.renewalFails.Inc()
	}
}

func (c *Collector) handedOff(e dlock.HandOff) {
	c.labels.get(e.Name, e.Kind, e.Owner).handOff(e.Local).Inc()
}

// nodeSilent counts by address: a deployment has few nodes, so the label stays bounded.
func (c *Collector) nodeSilent(e dlock.NodeSilence) {
	c.m.nodeSilences.WithLabelValues(e.Addr).Inc()
}
