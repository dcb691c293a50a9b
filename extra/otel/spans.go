package dlockotel

import (
	"context"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed51c676c8/dlock"
)

// spans makes a span per Lock, TryLock or Acquire call and one per hold, the hold's
// linked to the call's that acquired it.
//
// The start of a call does not name the call its end belongs to (two goroutines may wait
// for one lock), so each span is made when what it covers has ended, from the duration
// the event reports: it starts at the end minus that duration. Its parent is the span in
// the event's context (the caller's); the link is the hold's tie to its call.
type spans struct {
	tracer trace.Tracer

	mu    sync.Mutex
	calls map[holdKey]trace.SpanContext // guarded by mu: the call's span of each hold not yet ended
}

// holdKey names one hold: a fencing token is new at each acquisition of a name. (Two
// Clients of one observer on different deployments may repeat a token: then a hold may be
// linked to the other's call.)
type holdKey struct {
	name, kind string
	token      uint64
}

func newSpans(t trace.Tracer) *spans {
	return &spans{tracer: t, calls: make(map[holdKey]trace.SpanContext)}
}

// callNames are the span names of the calls of each kind; callName makes the others.
var callNames = map[string]string{
	dlock.KindMutex:     "dlock.Lock mutex",
	dlock.KindFair:      "dlock.Lock fair",
	dlock.KindRead:      "dlock.RLock read",
	dlock.KindWrite:     "dlock.Lock write",
	dlock.KindSemaphore: "dlock.Acquire semaphore",
}

func callName(kind string) string {
	if n, ok := callNames[kind]; ok {
		return n
	}
	return "dlock.Lock " + kind
}

// holdNames are the span names of the holds of each kind; holdName makes the others.
var holdNames = map[string]string{
	dlock.KindMutex:     "dlock.hold mutex",
	dlock.KindFair:      "dlock.hold fair",
	dlock.KindRead:      "dlock.hold read",
	dlock.KindWrite:     "dlock.hold write",
	dlock.KindSemaphore: "dlock.hold semaphore",
}

func holdName(kind string) string {
	if n, ok := holdNames[kind]; ok {
		return n
	}
	return "dlock.hold " + kind
}

// waitEnded records the span of a call that ended now; verdict is its last attempt's,
// if known.
func (s *spans) waitEnded(ev dlock.WaitEnd, outcome int, verdict dlock.Verdict, known bool) {
	end := time.Now()
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs,
		keyName.String(ev.Name), keyKind.String(ev.Kind),
		keyAttempts.Int(ev.Attempts), keyOutcome.String(outcomeNames[outcome]),
		keyWaited.Float64(ev.Waited.Seconds()))
	if ev.Owner != "" {
		attrs = append(attrs, keyOwner.String(ev.Owner))
	}
	if known {
		attrs = append(attrs, keyVerdict.String(verdict.String()))
	}
	if outcome == outcomeAcquired {
		attrs = append(attrs, keyToken.Int64(int64(ev.Token)))
	}
	_, span := s.tracer.Start(parent(ev.Context), callName(ev.Kind),
		trace.WithTimestamp(end.Add(-ev.Waited)), trace.WithAttributes(attrs...))
	if outcome == outcomeGaveUp {
		span.RecordError(ev.Err, trace.WithTimestamp(end))
		span.SetStatus(codes.Error, ev.Err.Error())
	}
	span.End(trace.WithTimestamp(end))
	if sc := span.SpanContext(); outcome == outcomeAcquired && sc.IsValid() {
		s.mu.Lock()
		s.calls[holdKey{ev.Name, ev.Kind, ev.Token}] = sc
		s.mu.Unlock()
	}
}

// holdEnded records the span of a hold that ended now, linked to its call's.
func (s *spans) holdEnded(ev dlock.HoldEnd) {
	end := time.Now()
	k := holdKey{ev.Name, ev.Kind, ev.Token}
	s.mu.Lock()
	call, linked := s.calls[k]
	delete(s.calls, k)
	s.mu.Unlock()
	attrs := make([]attribute.KeyValue, 0, 6)
	attrs = append(attrs, keyName.String(ev.Name), keyKind.String(ev.Kind),
		keyToken.Int64(int64(ev.Token)), keyEnd.String(ev.Cause.String()))
	if ev.Owner != "" {
		attrs = append(attrs, keyOwner.String(ev.Owner))
	}
	if ev.Cause != dlock.NotLost {
		attrs = append(attrs, keyReason.String(ev.Reason))
	}
	opts := []trace.SpanStartOption{trace.WithTimestamp(end.Add(-ev.Held)), trace.WithAttributes(attrs...)}
	if linked {
		opts = append(opts, trace.WithLinks(trace.Link{SpanContext: call}))
	}
	_, span := s.tracer.Start(parent(ev.Context), holdName(ev.Kind), opts...)
	if ev.Cause != dlock.NotLost {
		span.SetStatus(codes.Error, ev.Reason)
	}
	span.End(trace.WithTimestamp(end))
}

// parent is the context a span starts in: the one the event carries (the Lock's ctx, or
// the lease's context, which keeps its values), so that the caller's span is its parent.
func parent(ctx context.Context) context.Context {
	if ctx == nil {
		return context.Background()
	}
	return ctx
}
