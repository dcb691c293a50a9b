package engine

import "time"

// An Observer is told what the engine does; the public package turns each report into its
// public event (dlock.Observer). The engine calls its observers synchronously, in order,
// on the goroutine doing the work, and only when there are any (Client.observed): with
// none, a report is never built.
type Observer interface {
	WaitStarted(name, kind string)
	Attempted(AttemptReport)
	WaitEnded(WaitReport)
	HoldEnded(HoldReport)
	Renewal(RenewalReport)
	HandedOff(HandOffReport)
	NodeSilent(addr string)
}

// Verdict values as the public package numbers them (dlock.Verdict).
const (
	VerdictAcquired = iota
	VerdictHeld
	VerdictSplit
	VerdictLate
	VerdictFailed
)

// Loss causes as the public package numbers them (dlock.LossCause).
const (
	NotLost = iota
	LossExpired
	LossTaken
)

// AttemptReport is one attempt and its verdict (dlock.Attempt).
type AttemptReport struct {
	Name, Kind string
	Verdict    int
	Duration   time.Duration
	Err        error
}

// WaitReport is the end of a Lock, TryLock or Acquire call (dlock.WaitEnd).
type WaitReport struct {
	Name, Kind string
	Waited     time.Duration
	Attempts   int
	Token      uint64
	Err        error
}

// HoldReport is the end of a hold (dlock.HoldEnd).
type HoldReport struct {
	Name, Kind string
	Token      uint64
	Held       time.Duration
	Err        error
	Cause      int
	Reason     string
}

// RenewalReport is a failed renewal, or the first success after failures (dlock.Renewal).
type RenewalReport struct {
	Name, Kind string
	Token      uint64
	Err        error
	Recovered  bool
	Failures   int
	Left       time.Duration
}

// HandOffReport is a lock passed to a waiter without its own attempt (dlock.HandOff).
type HandOffReport struct {
	Name, Kind string
	Token      uint64
	Local      bool
}
