package observe

import (
	"context"
	"time"
)

// WaitStart is the start of a Lock, TryLock or Acquire call.
type WaitStart struct {
	Context context.Context // the ctx given to the call: its values (a trace span, say) belong to the wait
	Name    string          // the lock's name
	Kind    string          // KindMutex, KindFair, KindRead, KindWrite, KindSemaphore, KindTimestamp or KindMulti
	Owner   string          // the owner name of the Client (WithOwner; "" for none)
}

// Attempt is one attempt to take a lock in Redis.
type Attempt struct {
	Context  context.Context // the ctx given to the Lock, TryLock or Acquire call that made the attempt
	Name     string
	Kind     string
	Owner    string // the owner name of the Client (WithOwner; "" for none)
	Verdict  Verdict
	Duration time.Duration // from sending the request to the verdict
	Err      error         // with VerdictFailed (or nodes that failed under another verdict): a *dlock.QuorumError or the node's error
}

// WaitEnd is the end of a Lock, TryLock or Acquire call.
type WaitEnd struct {
	Context  context.Context // the ctx given to the call, as in its WaitStart
	Name     string
	Kind     string
	Owner    string        // the owner name of the Client (WithOwner; "" for none)
	Waited   time.Duration // from the call to its end
	Attempts int           // attempts made in Redis (0 when a hand-off or grant came first)
	Token    uint64        // the fencing token, when acquired
	// Err is nil when the lock was acquired; ErrNotAcquired when TryLock was refused;
	// otherwise why it gave up (the ctx's error, ErrClosed, a node failure), as returned.
	Err error
}

// HoldEnd is the end of a hold: one acquisition, to its release or loss.
type HoldEnd struct {
	Context context.Context // the lease's Context (the values of the ctx given to Lock), already cancelled
	Name    string
	Kind    string
	Owner   string // the owner name of the Client (WithOwner; "" for none)
	Token   uint64
	Held    time.Duration // from the acquisition (the attempt's verdict, the hand-off or the grant) to the end
	Err     error         // ErrReleased or ErrLost, as the lease's Err
	Cause   LossCause     // NotLost when released
	Reason  string        // in words, as the lease's error says it
}

// Renewal is a renewal that failed, or the first success after failures.
type Renewal struct {
	Name      string
	Kind      string
	Owner     string // the owner name of the Client (WithOwner; "" for none)
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
	Owner string // the owner name of the Client (WithOwner; "" for none)
	Token uint64 // the new holder's fencing token
	Local bool   // from a goroutine of this process (no round trip); false: granted by a release in Redis
}

// NodeSilence is a node that let a request time out.
type NodeSilence struct {
	Addr string // the node's address
}
