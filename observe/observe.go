// Package observe defines the events that dlock tells an Observer: every wait, attempt,
// acquisition, hold that ended (and why), failed renewal, hand-off and silent quorum node
// of a Client's locks. An Observer is given to a Client with dlock.WithObserver; package
// dlock names each type here by an alias (dlock.Observer is Observer), so an Observer
// written against either compiles against both.
//
// The package imports nothing of dlock's, as net/http/httptrace imports nothing of
// net/http: an adapter can name the events without the rest of the library. Two modules
// of the repository are such adapters: github.com/seed51c676c8/dlock/extra/prometheus
// (package dlockprom: Prometheus metrics) and github.com/seed51c676c8/dlock/extra/otel
// (package dlockotel: OpenTelemetry spans and metrics).
//
// The names this package's documentation uses without a package (Lock, TryLock, Acquire,
// Unlock, Extend, Close, a lease's Err, ValidUntil and Done, ErrLost, KindMutex and the
// other kinds) are dlock's.
package observe

// An Observer is told what a Client's locks do, as it happens. Every field is optional; a
// nil field is never called. With no Observer, no event is built: Lock and Unlock
// allocate nothing for them.
//
// Calls are synchronous and none is dropped. They are made on the goroutine doing the
// work (Lock, Unlock, the renewal scheduler, Close), and the events of one lease arrive in
// the order they happened: its hand-off, if any, then the WaitEnded that delivered it, its
// renewal events, and its HoldEnded. An event of a lease that happens before its Lock call
// has returned (a loss, on a loaded machine) is sent right after that call's WaitEnded,
// from its goroutine. A renewal's verdict is decided, and the lease updated or ended,
// before its event is sent.
//
// So an Observer must be safe for concurrent use (the events of different locks, and of
// different goroutines waiting for one, arrive concurrently) and must not block: it runs
// on the engine's goroutines (a Lock or Unlock call's, the renewal scheduler's, which
// renews every lease of the Client, and Close's). It must not call Lock, TryLock, Acquire,
// Do, Unlock, Extend or Close: the events of one lease are sent one at a time, and a call
// that ends a lease would wait for the event in progress; to act on an event, start a
// goroutine. Reading a lease (Err, ValidUntil, Done, Token) is fine. What an event reports
// has happened when it is sent: when HoldEnded is sent, the lease has ended (its Err is
// set, Done is closed) and this process no longer counts the hold, so a goroutine started
// from HoldEnded to take the lock again is not refused or kept waiting on its account.
//
// Re-entry (a Lock whose ctx carries a live lease of the lock) is not an acquisition and
// sends no event.
type Observer struct {
	// WaitStarted is called when a Lock, TryLock or Acquire call begins, before its
	// first attempt. Every WaitStarted is followed by exactly one WaitEnded. A call refused
	// before it waits (a closed Client, an invalid name) sends neither.
	WaitStarted func(WaitStart)
	// Attempted is called after each attempt to take the lock in Redis, with its verdict.
	Attempted func(Attempt)
	// WaitEnded is called when a Lock, TryLock or Acquire call ends: acquired, refused
	// (TryLock), or given up (ctx, Close, an error).
	WaitEnded func(WaitEnd)
	// HoldEnded is called once per lease that a Lock, TryLock or Acquire call delivered
	// (its WaitEnded reported it acquired), when its hold ends: released, or lost with the
	// cause. An acquisition that never reached its caller sends none: an attempt that
	// won but whose hold could not start (Close began), or a hand-off to a waiter that had
	// given up. A lost hold is reported when its lease ends (Done), which is at its
	// deadline (ValidUntil) at the latest.
	HoldEnded func(HoldEnd)
	// Renewal is called when a renewal fails, and when a renewal succeeds after failures
	// (Recovered). Successful renewals of a healthy lease send nothing, and a renewal that
	// finds the lease gone in Redis ends it: that is a HoldEnded (LossTaken).
	Renewal func(Renewal)
	// HandedOff is called when a lock passes to a waiter without its own attempt: from a
	// goroutine of this process to the next one (Local), or by a release in Redis that
	// granted it to this process's waiter. It is sent from the waiter's goroutine, once
	// the waiter has taken the hold, before its WaitEnded, which delivers the lease.
	HandedOff func(HandOff)
	// NodeSilent is called when a node of a quorum lets a request time out (an attempt,
	// a release or Extend, a renewal, a waiter's subscription, an election's reading)
	// and is then treated as silent (not waited for once the others settle an attempt)
	// until it answers again: once each time it becomes silent.
	NodeSilent func(NodeSilence)
}
