package dlockotel

import (
	"errors"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"

	"github.com/seed51c676c8/dlock"
)

// The attributes of spans and metrics (the package documentation lists which carries
// which).
const (
	keyName     = attribute.Key("dlock.lock.name")
	keyKind     = attribute.Key("dlock.lock.kind")
	keyOwner    = attribute.Key("dlock.owner")         // the Client's owner name, on spans only
	keyToken    = attribute.Key("dlock.token")         // the fencing token
	keyAttempts = attribute.Key("dlock.attempts")      // attempts a call made in Redis
	keyVerdict  = attribute.Key("dlock.verdict")       // an attempt's verdict (the last one's, on a span)
	keyOutcome  = attribute.Key("dlock.wait.outcome")  // how a call ended: acquired, refused, gave_up
	keyWaited   = attribute.Key("dlock.wait.duration") // seconds, on the call's span
	keyEnd      = attribute.Key("dlock.hold.end")      // released, expired, taken (LossCause.String)
	keyReason   = attribute.Key("dlock.hold.reason")   // a loss in words
	keyHandOff  = attribute.Key("dlock.handoff")       // local, grant
	keyAddr     = attribute.Key("server.address")      // a silent node
)

// How a Lock, TryLock or Acquire call ended, as keyOutcome says it.
const (
	outcomeAcquired = iota // Err nil
	outcomeRefused         // ErrNotAcquired: TryLock found the lock held
	outcomeGaveUp          // any other error: ctx, Close, node failures
	outcomes
)

var outcomeNames = [outcomes]string{"acquired", "refused", "gave_up"}

func outcomeOf(err error) int {
	switch {
	case err == nil:
		return outcomeAcquired
	case errors.Is(err, dlock.ErrNotAcquired):
		return outcomeRefused
	}
	return outcomeGaveUp
}

// The enumerations of dlock's events, each with one more slot for a value this package
// does not know (a newer dlock's): Verdict and LossCause name those "unknown".
const (
	verdicts = int(dlock.VerdictFailed) + 2
	causes   = int(dlock.LossTaken) + 2
)

func verdictIndex(v dlock.Verdict) int { return clamp(int(v), verdicts) }
func causeIndex(c dlock.LossCause) int { return clamp(int(c), causes) }

// clamp maps i to [0, n), values out of range to the last slot, "unknown".
func clamp(i, n int) int {
	if i < 0 || i >= n-1 {
		return n - 1
	}
	return i
}

// measure is one attribute set in the form the instruments take it, built once: passing
// a prebuilt option slice to Add and Record allocates nothing.
type measure struct {
	add []metric.AddOption
	rec []metric.RecordOption
}

func newMeasure(kvs ...attribute.KeyValue) measure {
	opt := metric.WithAttributeSet(attribute.NewSet(kvs...))
	return measure{add: []metric.AddOption{opt}, rec: []metric.RecordOption{opt}}
}

// lockAttrs are the attribute sets of one (name, kind) pair, the name as the metrics
// carry it: the pair alone, and with each value of each event's own attribute.
type lockAttrs struct {
	lock    measure           // name, kind
	verdict [verdicts]measure // + dlock.verdict
	outcome [outcomes]measure // + dlock.wait.outcome
	end     [causes]measure   // + dlock.hold.end
	handOff [2]measure        // + dlock.handoff: grant, local
}

func newLockAttrs(name, kind string) *lockAttrs {
	n, k := keyName.String(name), keyKind.String(kind)
	a := &lockAttrs{lock: newMeasure(n, k)}
	for i := range a.verdict {
		a.verdict[i] = newMeasure(n, k, keyVerdict.String(dlock.Verdict(i).String()))
	}
	for i := range a.outcome {
		a.outcome[i] = newMeasure(n, k, keyOutcome.String(outcomeNames[i]))
	}
	for i := range a.end {
		a.end[i] = newMeasure(n, k, keyEnd.String(dlock.LossCause(i).String()))
	}
	a.handOff[0] = newMeasure(n, k, keyHandOff.String("grant"))
	a.handOff[1] = newMeasure(n, k, keyHandOff.String("local"))
	return a
}
