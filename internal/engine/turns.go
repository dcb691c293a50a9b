package engine

import "time"

// The lengths of a Mutex's turns and grants between processes (coordinator.go).

// turnLength is how long a released lock is kept for the process whose turn it is. That
// process was told by the release and normally asks within a round trip; the turn only
// lapses when it has died or stopped waiting without saying so. Each Client keeps its own
// (a turn), which tests change before they use it.
const turnLength = 20 * time.Millisecond

// A turn is a Client's turn length, and the same as a script argument (boxed once).
type turn struct {
	length time.Duration
	arg    any
}

func newTurn(d time.Duration) turn { return turn{length: d, arg: ms(d.Milliseconds())} }

// grantLength bounds the lease that a release grants, and askLife is how long a standing
// request lives unless the process refreshes it, which it does every waiterRefresh while
// it waits.
const (
	grantLength = waiterTTL * time.Millisecond
	askLife     = waiterTTL * time.Millisecond
)

var (
	grantLengthArg any = ms(grantLength.Milliseconds())
	askLifeArg     any = ms(askLife.Milliseconds())
	releaseMode    any = "release"
	leaveMode      any = "leave"
)
