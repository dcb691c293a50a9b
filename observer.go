package dlock

import (
	"github.com/seed51c676c8/dlock/internal/engine"
	"github.com/seed51c676c8/dlock/observe"
)

// WithObserver makes o receive the Client's events ([observe] says what each is,
// when it is sent and what o must not do). Given more than once, every Observer receives
// every event, in the order the options were given.
func WithObserver(o Observer) Option {
	return func(c *clientConfig) {
		c.Observers = append(c.Observers, o)
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

// The observer's types and constants are package observe's, which imports nothing of
// dlock's; these names keep Observers written against dlock compiling.
type (
	// Observer is [observe.Observer]: what a Client's locks do, as it happens.
	Observer = observe.Observer
	// WaitStart is [observe.WaitStart]: a Lock, TryLock or Acquire call began.
	WaitStart = observe.WaitStart
	// Attempt is [observe.Attempt]: one attempt in Redis and its verdict.
	Attempt = observe.Attempt
	// WaitEnd is [observe.WaitEnd]: a Lock, TryLock or Acquire call ended.
	WaitEnd = observe.WaitEnd
	// HoldEnd is [observe.HoldEnd]: a hold was released or lost.
	HoldEnd = observe.HoldEnd
	// Renewal is [observe.Renewal]: a renewal failed, or recovered.
	Renewal = observe.Renewal
	// HandOff is [observe.HandOff]: a lock passed to a waiter of this process.
	HandOff = observe.HandOff
	// NodeSilence is [observe.NodeSilence]: a quorum node let a request time out.
	NodeSilence = observe.NodeSilence
	// Verdict is [observe.Verdict]: what an attempt came to.
	Verdict = observe.Verdict
	// LossCause is [observe.LossCause]: why a hold was lost.
	LossCause = observe.LossCause
)

// Verdicts and loss causes: see [observe.Verdict] and [observe.LossCause].
const (
	VerdictAcquired = observe.VerdictAcquired // the lock was taken
	VerdictHeld     = observe.VerdictHeld     // another holder has it
	VerdictSplit    = observe.VerdictSplit    // on a quorum, no one has a majority
	VerdictLate     = observe.VerdictLate     // a majority granted, too late
	VerdictFailed   = observe.VerdictFailed   // nodes failed or did not answer

	NotLost     = observe.NotLost     // released, or handed to the next waiter
	LossExpired = observe.LossExpired // the deadline passed before a renewal succeeded
	LossTaken   = observe.LossTaken   // Redis no longer held the lease's token
)
