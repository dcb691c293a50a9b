package engine

import (
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// Turns between processes (Mutex on one deployment): a release gives the lock to the
// process that has waited longest, not to whichever request lands first. A Lock refused
// again (its first attempt does not stand, so an uncontended Lock writes no request) puts
// its process at the back of the lock's turn list (once) with a standing request
// (mutex_asks.lua): the token it asks with, which it keeps across its attempts, and how
// many fencing tokens to reserve. The release script takes the first process of the list
// and, if its request is live, grants it at once: it sets the lock to the request's token
// and publishes the grant (grants.go), so the process holds the lock without a round trip
// of its own. Its lease clock started before it first sent that token, which was before
// the grant, so the lease never outlasts the key; the grant sets the key for at most
// grantLength, and the new holder's first renewal extends it to the TTL. A process that
// died with a live request keeps the lock for at most grantLength. Without a live request
// (the process stopped refreshing it), the release gives the process the turn instead: for
// turnLength only it may take the free lock. Waiters of other processes are not woken by a
// grant or a turn that is not theirs: only when it could have lapsed. Turns need one
// deployment: independent quorum nodes would pass the lock to different processes, so a
// quorum Client takes no turns.

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

// mutexAsk is this process's standing request for a Mutex: the token it asks with until it
// gets the lock, and a time before it first sent it. Redis makes the token a tombstone
// once it is served or left (gone.lua), so that an attempt of an older request that lands
// late does not stand again.
type mutexAsk struct {
	token any // a hex string
	sent  time.Time
	// shortest (guarded by local.mu) is the shortest TTL any attempt of it carried: a
	// grant sets the key for the TTL of the last attempt that landed, which may be any
	// of them, one that lands late included (handles of one name with different TTLs
	// share the request).
	shortest time.Duration
}

// withdraw takes this process out of the lock's turns without waiting for the reply,
// passing the lock on if a release granted it meanwhile, or the turn if it had it: the
// last local waiter has given up. ask is its standing request.
func withdraw(t *Target, s *mutexKeys, ask *mutexAsk) {
	c := t.c
	sendEvery(c, c.turn.length, func(call *batch.Call) bool {
		mutexRelease(s, c, ask.token, c.nodes[call.Node].PublishCommand(), leaveMode, c.id, call)
		return true
	})
}

// LeaveTurns sends the leave of the Mutex t's turns for a standing request with token ask,
// as the last local waiter that gives up does, for tests.
func LeaveTurns(t *Target, ask string) {
	withdraw(t, t.scheme.(*mutexScheme).mutexKeys, &mutexAsk{token: ask})
}
