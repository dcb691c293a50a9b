package engine

import (
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/scripts"
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
	// shortest (guarded by its key's localShard.mu) is the shortest TTL any attempt of it carried: a
	// grant sets the key for the TTL of the last attempt that landed, which may be any
	// of them, one that lands late included (handles of one name with different TTLs
	// share the request).
	shortest time.Duration
}

// withdraw takes this process out of the turns of t's lock key without waiting for the
// reply, passing the lock on if a release granted it meanwhile, or the turn if it had it:
// the last local waiter has given up. ask is its standing request (made by a Mutex of the
// key, whichever kind the last waiter is).
func withdraw(t *Target, ask *mutexAsk) {
	c := t.c
	s := newMutexKeys(t, true)
	sendEvery(c, c.turn.length, func(call *batch.Call) bool {
		mutexRelease(s, c, ask.token, c.nodes[call.Node].PublishCommand(), leaveMode, c.id, call)
		return true
	})
}

// LeaveTurns sends the leave of the Mutex t's turns for a standing request with token ask,
// as the last local waiter that gives up does, for tests.
func LeaveTurns(t *Target, ask string) {
	withdraw(t, &mutexAsk{token: ask})
}

// mutexKeys are the keys and constant arguments of a Mutex's scripts, made (and boxed) once
// per handle; an RWMutex writer releases as a Mutex does, with them. Read-only.
type mutexKeys struct {
	keys, releaseKeys       []string // acquire: lock, fence, turns, asks, gone; release: lock, turns, fence, asks, gone
	keyArgs, releaseKeyArgs []any
	channelArg              any
	turns                   bool // its releases pass the lock in turns (mutexTurns)
	turnIDArg               any  // this Client's id in the turn list, or "" with no turns
	turnsLifeArg            any  // how long a turn list outlives its last change, in ms
}

func newMutexKeys(t *Target, turns bool) *mutexKeys {
	k := t.keys
	s := &mutexKeys{
		keys:        []string{k.Lock, k.Fence, k.Turns, k.Asks, k.Gone},
		releaseKeys: []string{k.Lock, k.Turns, k.Fence, k.Asks, k.Gone},
		channelArg:  k.Channel,
		turns:       turns,
		turnIDArg:   noArg,
		// Waiters refresh the list at least once per holder's TTL (their expiry hint).
		turnsLifeArg: ms(max(3*t.cfg.TTL, time.Minute).Milliseconds()),
	}
	if turns {
		s.turnIDArg = t.c.id
	}
	s.keyArgs, s.releaseKeyArgs = boxed(s.keys), boxed(s.releaseKeys)
	return s
}

// turn is the turn length argument of a release: "" when the releases take no turns.
func (s *mutexKeys) turn(c *Client) any {
	if s.turns {
		return c.turn.arg
	}
	return noArg
}

// mutexRelease prepares mutex_release.lua on the keys of s: a release (mode releaseMode)
// of token, or a process that stops waiting (leaveMode, with its id as me and its
// request's token).
func mutexRelease(s *mutexKeys, c *Client, token any, publish string, mode, me any, call *batch.Call) {
	call.Script = scripts.MutexRelease
	call.Keys, call.KeyArgs = s.releaseKeys, s.releaseKeyArgs
	call.Args = append(call.Args[:0], token, s.channelArg, publishArg(publish), s.turn(c), grantLengthArg, mode, me)
}
