// Package dlockotel is the OpenTelemetry instrumentation of dlock: a span for every
// Lock, TryLock and Acquire call and for every hold, and metrics through an
// OpenTelemetry meter, from the events of a dlock.Observer.
//
//	import dlockotel "github.com/seed51c676c8/dlock/extra/otel"
//
//	tel, err := dlockotel.New() // the global TracerProvider and MeterProvider
//	if err != nil {
//		return err
//	}
//	client := dlock.New(rdb, dlock.WithObserver(tel.Observer()))
//
// It is a module of its own, so that dlock itself depends on no OpenTelemetry package.
// Its name, after go-redis's redisotel, is not its path's last element (otel), so that
// it sits beside go.opentelemetry.io/otel without a rename.
//
// # Spans
//
// A call's span is named after the method and the kind ("dlock.Lock mutex", "dlock.RLock
// read", "dlock.Acquire semaphore"; a TryLock's is named as its Lock's) and lasts from the
// call to its return. Its attributes: dlock.lock.name, dlock.lock.kind, dlock.attempts (the
// attempts made in Redis), dlock.wait.outcome (acquired,
// refused: TryLock found it held, or gave_up), dlock.wait.duration (seconds),
// dlock.token (the fencing token, when acquired), dlock.verdict, the verdict of the
// last attempt (acquired, held, split, late, failed), and dlock.owner, the owner name of
// the Client that made the call (dlock.WithOwner, by default "host:pid"; absent for a
// Client without one). A call that gave up has status Error and the error as an event; a
// refusal is not an error.
//
// A hold's span ("dlock.hold mutex") lasts from the acquisition to the release or the
// loss, with dlock.lock.name, dlock.lock.kind, dlock.token, dlock.owner and
// dlock.hold.end (released, expired or taken); a lost hold has status Error and
// dlock.hold.reason. It is linked to the span of the call that acquired it.
//
// Both spans are children of the caller's span: the call's of the span in the ctx given to
// Lock, the hold's of the span in the lease's context (which keeps that ctx's values).
// Each is made when what it covers has ended, with the start time it had, since the
// start of a call does not name the call its end belongs to. dlock.verdict is set only when the
// last attempt is known to be the call's own: when no other call of the same lock (name
// and kind) was under way in the process at the same time, as attempts name their lock
// but not their call.
//
// A go-redis client instrumented with redisotel shows the scripts dlock runs as spans of
// their own. Those of a Lock, Extend or Unlock are children of the span in the ctx given
// to it, when the round trip that carried them carried only that caller's calls: dlock
// shares a round trip between the calls made while the one before it was under way, and
// one of several callers' calls is a root span rather than a child of one of them. So are
// renewals, which belong to no caller. They are never children of dlock's own call span,
// which is made only when the call has ended.
//
// # Metrics
//
// Every metric has the attributes dlock.lock.name and dlock.lock.kind, and some one more:
//
//	dlock.wait.duration      histogram, s   calls, by dlock.wait.outcome
//	dlock.hold.duration      histogram, s   holds, by dlock.hold.end
//	dlock.acquisitions       counter        leases acquired (hand-offs included)
//	dlock.refusals           counter        TryLock and TryAcquire calls refused
//	dlock.losses             counter        leases lost, by dlock.hold.end (expired, taken)
//	dlock.renewal.failures   counter        renewals that failed
//	dlock.handoffs           counter        locks handed to a waiter, by dlock.handoff (local, grant)
//	dlock.attempts           counter        attempts in Redis, by dlock.verdict
//	dlock.leases.held        up-down        leases held now
//	dlock.waiters            up-down        calls under way now
//	dlock.node.silences      counter        a node let a request time out (server.address only)
//
// Lock names such as "order:42" are unbounded, and each would make time series of its
// own: metrics carry at most WithMaxNames names (DefaultMaxNames), the first seen, and
// Other for every later one; WithNameMapper folds names before that. Spans carry the
// lock's own name. For the same reason metrics never carry dlock.owner: the default owner,
// host and pid, is new at every restart.
package dlockotel
