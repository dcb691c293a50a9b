package dlock

import (
	"context"
	"time"

	"github.com/seed51c676c8/dlock/internal/engine"
)

// An Observer is told what a Client's locks do, as it happens: every wait, attempt,
// acquisition, hold that ended (and why), failed renewal, hand-off and silent quorum node.
// Every field is optional; a nil field is never called. With no Observer, no event is
// built: Lock and Unlock allocate nothing for them. Two modules of their own make
// Observers: github.com/seed51c676c8/dlock/extra/prometheus (Collector.Observer: Prometheus
// metrics) and github.com/seed51c676c8/dlock/extra/otel (Telemetry.Observer: OpenTelemetry
// spans and metrics).
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
	// a release or Extend, a renewal, a waiter's subscription) and is then
	// treated as silent (not waited for once the others settle an attempt) until it
	// answers again: once each time it becomes silent.
	NodeSilent func(NodeSilence)
}

// WithObserver makes o receive the Client's events. Given more than once, every Observer
// receives every event, in the order the options were given.
func WithObserver(o Observer) Option {
	return func(c *clientConfig) {
		c.Observers = append(c.Observers, observerAdapter{o})
	}
}

// The kinds an event's Kind names, besides KindMutex, KindFair and KindSemaphore.
const (
	KindRead  = engine.KindRead  // RWMutex.RLock: a read lease
	KindWrite = engine.KindWrite // RWMutex.Lock: the write lease
	// KindTimestamp is a TimestampMutex's (Inspect reports its key as a KindMutex).
	KindTimestamp = engine.KindTimestamp
	// KindMulti is a MultiMutex's; Name is its names joined by commas.
	KindMulti = engine.KindMulti
)

// WaitStart is the start of a Lock, TryLock or Acquire call.
type WaitStart struct {
	Context context.Context // the ctx given to the call: its values (a trace span, say) belong to the wait
	Name    string          // the lock's name
	Kind    string          // KindMutex, KindFair, KindRead, KindWrite or KindSemaphore
}

// Verdict is what one attempt came to.
type Verdict int

const (
	// VerdictAcquired: the lock was taken (on a quorum, by a majority, with time left).
	VerdictAcquired Verdict = engine.VerdictAcquired
	// VerdictHeld: another holder has it; the caller waits for its release.
	VerdictHeld Verdict = engine.VerdictHeld
	// VerdictSplit: on a quorum, contenders split the nodes and no one has a majority.
	VerdictSplit Verdict = engine.VerdictSplit
	// VerdictLate: a majority granted, but too late for any of the lease to be left.
	VerdictLate Verdict = engine.VerdictLate
	// VerdictFailed: nodes failed or did not answer, so there is no verdict (Err says why).
	VerdictFailed Verdict = engine.VerdictFailed
)

// String returns "acquired", "held", "split", "late" or "failed".
func (v Verdict) String() string {
	switch v {
	case VerdictAcquired:
		return "acquired"
	case VerdictHeld:
		return "held"
	case VerdictSplit:
		return "split"
	case VerdictLate:
		return "late"
	case VerdictFailed:
		return "failed"
	}
	return "unknown"
}

// Attempt is one attempt to take a lock in Redis.
type Attempt struct {
	Context  context.Context // the ctx given to the Lock, TryLock or Acquire call that made the attempt
	Name     string
	Kind     string
	Verdict  Verdict
	Duration time.Duration // from sending the request to the verdict
	Err      error         // with VerdictFailed (or nodes that failed under another verdict): a *QuorumError or the node's error
}

// WaitEnd is the end of a Lock, TryLock or Acquire call.
type WaitEnd struct {
	Context  context.Context // the ctx given to the call, as in its WaitStart
	Name     string
	Kind     string
	Waited   time.Duration // from the call to its end
	Attempts int           // attempts made in Redis (0 when a hand-off or grant came first)
	Token    uint64        // the fencing token, when acquired
	// Err is nil when the lock was acquired; ErrNotAcquired when TryLock was refused;
	// otherwise why it gave up (the ctx's error, ErrClosed, a node failure), as returned.
	Err error
}

// LossCause is why a hold was lost.
type LossCause int

const (
	// NotLost: the hold was released by Unlock (or by Close), or handed to the next
	// waiter of this process.
	NotLost LossCause = engine.NotLost
	// LossExpired: its deadline passed before a renewal succeeded (Redis could not be
	// reached or answered too late, or the lease was not renewed).
	LossExpired LossCause = engine.LossExpired
	// LossTaken: Redis said the key no longer held the lease's token: it expired there,
	// was deleted (FLUSHALL, ForceUnlock, a failover that lost it) or taken by another.
	LossTaken LossCause = engine.LossTaken
)

// String returns "released", "expired" or "taken".
func (c LossCause) String() string {
	switch c {
	case NotLost:
		return "released"
	case LossExpired:
		return "expired"
	case LossTaken:
		return "taken"
	}
	return "unknown"
}

// HoldEnd is the end of a hold: one acquisition, to its release or loss.
type HoldEnd struct {
	Context context.Context // the lease's Context (the values of the ctx given to Lock), already cancelled
	Name    string
	Kind    string
	Token   uint64
	Held    time.Duration // from the acquisition (the attempt's verdict, the hand-off or the grant) to the end
	Err     error         // ErrReleased or ErrLost, as Lease.Err
	Cause   LossCause     // NotLost when released
	Reason  string        // in words, as the lease's error says it
}

// Renewal is a renewal that failed, or the first success after failures.
type Renewal struct {
	Name      string
	Kind      string
	Token     uint64
	Err       error         // why it failed; nil when Recovered
	Recovered bool          // it succeeded after Failures failures
	Failures  int           // consecutive failures so far (or before the recovery)
	Left      time.Duration // time left until the deadline (ValidUntil), after this renewal; <= 0 once it passed
}

// HandOff is a lock passed to a waiter of this process without the waiter's own attempt.
type HandOff struct {
	Name  string
	Kind  string
	Token uint64 // the new holder's fencing token
	Local bool   // from a goroutine of this process (no round trip); false: granted by a release in Redis
}

// NodeSilence is a node that let a request time out.
type NodeSilence struct {
	Addr string // the node's address
}

// observerAdapter turns the engine's reports into the public events.
type observerAdapter struct{ o Observer }

var _ engine.Observer = observerAdapter{}

func (a observerAdapter) WaitStarted(ctx context.Context, name, kind string) {
	if f := a.o.WaitStarted; f != nil {
		f(WaitStart{Context: ctx, Name: name, Kind: kind})
	}
}

func (a observerAdapter) Attempted(r engine.AttemptReport) {
	if f := a.o.Attempted; f != nil {
		f(Attempt{Context: r.Ctx, Name: r.Name, Kind: r.Kind, Verdict: Verdict(r.Verdict), Duration: r.Duration, Err: r.Err})
	}
}

func (a observerAdapter) WaitEnded(r engine.WaitReport) {
	if f := a.o.WaitEnded; f != nil {
		f(WaitEnd{Context: r.Ctx, Name: r.Name, Kind: r.Kind, Waited: r.Waited, Attempts: r.Attempts, Token: r.Token, Err: r.Err})
	}
}

func (a observerAdapter) HoldEnded(r engine.HoldReport) {
	if f := a.o.HoldEnded; f != nil {
		f(HoldEnd{Context: r.Ctx, Name: r.Name, Kind: r.Kind, Token: r.Token, Held: r.Held, Err: r.Err, Cause: LossCause(r.Cause), Reason: r.Reason})
	}
}

func (a observerAdapter) Renewal(r engine.RenewalReport) {
	if f := a.o.Renewal; f != nil {
		f(Renewal{Name: r.Name, Kind: r.Kind, Token: r.Token, Err: r.Err, Recovered: r.Recovered, Failures: r.Failures, Left: r.Left})
	}
}

func (a observerAdapter) HandedOff(r engine.HandOffReport) {
	if f := a.o.HandedOff; f != nil {
		f(HandOff{Name: r.Name, Kind: r.Kind, Token: r.Token, Local: r.Local})
	}
}

func (a observerAdapter) NodeSilent(addr string) {
	if f := a.o.NodeSilent; f != nil {
		f(NodeSilence{Addr: addr})
	}
}
