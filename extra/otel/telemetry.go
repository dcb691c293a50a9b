package dlockotel

import (
	"go.opentelemetry.io/otel"

	"github.com/seed51c676c8/dlock"
)

// ScopeName is the instrumentation scope of the tracer and the meter.
const ScopeName = "github.com/seed51c676c8/dlock/extra/otel"

// Telemetry turns a dlock Client's events into spans and metrics. Make it with New and
// give its Observer to dlock.New or dlock.NewQuorum with dlock.WithObserver. One
// Telemetry may serve several Clients. It is safe for concurrent use.
type Telemetry struct {
	names *names
	in    *instruments
	spans *spans
	calls *calls
}

// New makes a Telemetry with its instruments registered on the meter of its
// MeterProvider. It fails only for an invalid option or if the meter refuses an
// instrument; then nothing is returned.
func New(opts ...Option) (*Telemetry, error) {
	var c config
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	if c.err != nil {
		return nil, c.err
	}
	if c.tp == nil {
		c.tp = otel.GetTracerProvider()
	}
	if c.mp == nil {
		c.mp = otel.GetMeterProvider()
	}
	if c.maxNames == 0 {
		c.maxNames = DefaultMaxNames
	}
	in, err := newInstruments(c.mp.Meter(ScopeName))
	if err != nil {
		return nil, err
	}
	return &Telemetry{
		names: newNames(c.mapper, c.maxNames),
		in:    in,
		spans: newSpans(c.tp.Tracer(ScopeName)),
		calls: newCalls(),
	}, nil
}

// Observer returns the dlock.Observer that feeds t. Each call returns an equivalent one.
func (t *Telemetry) Observer() dlock.Observer {
	return dlock.Observer{
		WaitStarted: t.waitStarted,
		Attempted:   t.attempted,
		WaitEnded:   t.waitEnded,
		HoldEnded:   t.holdEnded,
		Renewal:     t.renewal,
		HandedOff:   t.handedOff,
		NodeSilent:  t.in.nodeSilent,
	}
}

func (t *Telemetry) waitStarted(ev dlock.WaitStart) {
	t.calls.started(ev.Name, ev.Kind)
	t.in.waitStarted(t.names.of(ev.Name, ev.Kind))
}

func (t *Telemetry) attempted(ev dlock.Attempt) {
	t.calls.attempted(ev.Name, ev.Kind, ev.Verdict)
	t.in.attempted(t.names.of(ev.Name, ev.Kind), ev)
}

func (t *Telemetry) waitEnded(ev dlock.WaitEnd) {
	outcome := outcomeOf(ev.Err)
	verdict, known := t.calls.ended(ev.Name, ev.Kind)
	t.in.waitEnded(t.names.of(ev.Name, ev.Kind), ev, outcome)
	t.spans.waitEnded(ev, outcome, verdict, known)
}

func (t *Telemetry) holdEnded(ev dlock.HoldEnd) {
	t.in.holdEnded(t.names.of(ev.Name, ev.Kind), ev)
	t.spans.holdEnded(ev)
}

func (t *Telemetry) renewal(ev dlock.Renewal) {
	t.in.renewal(t.names.of(ev.Name, ev.Kind), ev)
}

func (t *Telemetry) handedOff(ev dlock.HandOff) {
	t.in.handedOff(t.names.of(ev.Name, ev.Kind), ev)
}
