package dlockotel

import (
	"context"
	"errors"
	"fmt"

	"go.opentelemetry.io/otel/metric"

	"github.com/seed51c676c8/dlock"
)

// secondBuckets are the histograms' bucket bounds, in seconds: from a round trip on a
// local network to a long critical section. OpenTelemetry's default bounds are made for
// milliseconds.
var secondBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}

// instruments are the metrics, the same as extra/prometheus exports, under
// OpenTelemetry's names (the package documentation lists them).
type instruments struct {
	wait, hold      metric.Float64Histogram
	acquisitions    metric.Int64Counter
	refusals        metric.Int64Counter
	losses          metric.Int64Counter
	renewalFailures metric.Int64Counter
	handOffs        metric.Int64Counter
	attempts        metric.Int64Counter
	silences        metric.Int64Counter
	held, waiters   metric.Int64UpDownCounter
}

func newInstruments(m metric.Meter) (*instruments, error) {
	var in instruments
	var err, e error
	sec := []metric.Float64HistogramOption{metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(secondBuckets...)}
	in.wait, e = m.Float64Histogram("dlock.wait.duration", append(sec, metric.WithDescription("How long Lock, TryLock and Acquire calls took, by how they ended (dlock.wait.outcome)."))...)
	err = errors.Join(err, e)
	in.hold, e = m.Float64Histogram("dlock.hold.duration", append(sec, metric.WithDescription("How long leases were held, by how the hold ended (dlock.hold.end)."))...)
	err = errors.Join(err, e)
	counter := func(name, unit, desc string) metric.Int64Counter {
		c, e := m.Int64Counter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	in.acquisitions = counter("dlock.acquisitions", "{acquisition}", "Leases acquired (Lock, TryLock and Acquire calls that returned one).")
	in.refusals = counter("dlock.refusals", "{refusal}", "TryLock and TryAcquire calls refused because the lock was held.")
	in.losses = counter("dlock.losses", "{loss}", "Leases lost, by cause (dlock.hold.end: expired or taken).")
	in.renewalFailures = counter("dlock.renewal.failures", "{failure}", "Renewals that failed (the lease is retried until its deadline).")
	in.handOffs = counter("dlock.handoffs", "{handoff}", "Locks passed to a waiting caller without its own attempt: local, or granted by a release in Redis (dlock.handoff).")
	in.attempts = counter("dlock.attempts", "{attempt}", "Attempts to take a lock in Redis, by verdict (dlock.verdict).")
	in.silences = counter("dlock.node.silences", "{silence}", "Times a node let a request time out and was then treated as silent.")
	upDown := func(name, unit, desc string) metric.Int64UpDownCounter {
		c, e := m.Int64UpDownCounter(name, metric.WithUnit(unit), metric.WithDescription(desc))
		err = errors.Join(err, e)
		return c
	}
	in.held = upDown("dlock.leases.held", "{lease}", "Leases held now.")
	in.waiters = upDown("dlock.waiters", "{call}", "Lock, TryLock and Acquire calls under way now.")
	if err != nil {
		return nil, fmt.Errorf("dlockotel: creating the instruments: %w", err)
	}
	return &in, nil
}

// The recording of each event. The instruments are told with context.Background: a
// measurement needs no context, and the caller's may already be cancelled.

func (in *instruments) waitStarted(a *lockAttrs) {
	in.waiters.Add(context.Background(), 1, a.lock.add...)
}

func (in *instruments) attempted(a *lockAttrs, ev dlock.Attempt) {
	in.attempts.Add(context.Background(), 1, a.verdict[verdictIndex(ev.Verdict)].add...)
}

func (in *instruments) waitEnded(a *lockAttrs, ev dlock.WaitEnd, outcome int) {
	ctx := context.Background()
	in.waiters.Add(ctx, -1, a.lock.add...)
	in.wait.Record(ctx, ev.Waited.Seconds(), a.outcome[outcome].rec...)
	switch outcome {
	case outcomeAcquired:
		in.acquisitions.Add(ctx, 1, a.lock.add...)
		in.held.Add(ctx, 1, a.lock.add...)
	case outcomeRefused:
		in.refusals.Add(ctx, 1, a.lock.add...)
	}
}

func (in *instruments) holdEnded(a *lockAttrs, ev dlock.HoldEnd) {
	ctx := context.Background()
	in.held.Add(ctx, -1, a.lock.add...)
	end := a.end[causeIndex(ev.Cause)]
	in.hold.Record(ctx, ev.Held.Seconds(), end.rec...)
	if ev.Cause != dlock.NotLost {
		in.losses.Add(ctx, 1, end.add...)
	}
}

func (in *instruments) renewal(a *lockAttrs, ev dlock.Renewal) {
	if !ev.Recovered {
		in.renewalFailures.Add(context.Background(), 1, a.lock.add...)
	}
}

func (in *instruments) handedOff(a *lockAttrs, ev dlock.HandOff) {
	i := 0
	if ev.Local {
		i = 1
	}
	in.handOffs.Add(context.Background(), 1, a.handOff[i].add...)
}

func (in *instruments) nodeSilent(ev dlock.NodeSilence) {
	// Rare, and as many addresses as the deployment has nodes: built when it happens.
	in.silences.Add(context.Background(), 1, metric.WithAttributes(keyAddr.String(ev.Addr)))
}
