package dlock

import (
	"fmt"
	"strconv"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// A scheme is how one kind of lock lives in Redis: which scripts take, renew and release
// it, with which keys and arguments, and how its waiters wait. The engine (acquire.go,
// wait.go, release.go, renewal.go) is the same for every kind.
type scheme interface {
	kind() string
	// acquire prepares one attempt of r with the holder token of the attempt.
	acquire(t *target, r *request, token any, call *batch.Call)
	// release prepares the end of the hold with token; publish is the publish command, or
	// "" to wake no one.
	release(t *target, token any, publish string, call *batch.Call)
	// extend prepares the renewal of the hold with token for ttl milliseconds. It only
	// lengthens the lease in Redis unless set, which sets it to exactly ttl (an Extend
	// that shortens it): see hold.extend.
	extend(t *target, token any, ttl string, set bool, call *batch.Call)
	// leave prepares taking a waiter that gives up out of the wait lists; it reports false
	// for schemes that keep none.
	leave(t *target, r *request, call *batch.Call) bool
	// need is how many of n nodes must agree.
	need(n int) int
	// channels are what a waiter listens on, on node n.
	channels(t *target, r *request, n *node) []notify.Channel
	// traits
	queued() bool     // waiters keep an entry in Redis, refreshed while they wait
	localQueue() bool // goroutines of one process queue locally; only the first asks Redis
	stable() bool     // every attempt of a request uses its waiter id as holder token
	reentrant() bool  // a Lock with a ctx that carries a live lease of it joins that hold
	handsOff() bool   // Unlock may hand the hold to the next local waiter (see handoff.go)
}

// request is one call of Lock, TryLock, Acquire...: what all its attempts share.
type request struct {
	waiter string       // the caller's id in Redis wait lists; stable across its attempts
	owner  string       // RWMutex downgrade: the token of the write lease the caller holds
	n      int64        // Semaphore: the permits asked for
	try    bool         // one attempt, never wait
	local  *localWaiter // the caller's place in the local queue (&wait), for kinds that queue locally
	wait   localWaiter

	// Mutex, set before each attempt: see handoff.go, turns.go and mutex_acquire.lua.
	reserve int64       // fencing tokens to reserve: at least 1 plus one per local waiter behind the caller
	behind  int64       // local waiters behind the caller: the hand-offs the hold may make
	grants  chan string // the details of grants to this caller, made when it listens (turns.go)
	// firstSent is when the first attempt of a request with a stable token started:
	// a FairMutex hand-over to that token happens after it.
	firstSent time.Time
}

// Wait-list entries live this long unless their waiter refreshes them, which it does every
// waiterRefresh: a waiter that dies is skipped within waiterTTL.
const (
	waiterTTL     = 3000 // milliseconds
	waiterRefresh = waiterTTL / 3
)

var waiterTTLArg = strconv.Itoa(waiterTTL)

func ms(ttlMillis int64) string { return strconv.FormatInt(ttlMillis, 10) }

// Script arguments that are constants, boxed once.
var (
	yesArg, noFlagArg, noArg any = "1", "0", ""
	setArg                   any = "set"
	publishArgs                  = map[string]any{"PUBLISH": "PUBLISH", "SPUBLISH": "SPUBLISH", "": ""}
)

func flagArg(b bool) any {
	if b {
		return yesArg
	}
	return noFlagArg
}

// publishArg boxes a publish command (PUBLISH, SPUBLISH or "") without allocating.
func publishArg(cmd string) any { return publishArgs[cmd] }

func keyspaceChannel(n *node, key string) notify.Channel {
	return notify.Channel{Name: fmt.Sprintf("__keyspace@%d__:%s", n.db, key)}
}

func releaseChannel(t *target, n *node) notify.Channel {
	return notify.Channel{Name: t.keys.Channel, Sharded: n.cluster}
}

// mutexScheme: a plain string key holding the holder's token (SET NX PX, compare-and-delete).
type mutexScheme struct{}

func (mutexScheme) kind() string { return "mutex" }

func (mutexScheme) acquire(t *target, r *request, token any, call *batch.Call) {
	call.Script = scripts.MutexAcquire
	call.Keys, call.KeyArgs = t.mutexKeys, t.mutexKeyArgs
	call.Args = []any{token, t.ttlArg, r.reserve, t.turnIDArg, flagArg(!r.try), t.turnsLifeArg, askLifeArg}
}

func (mutexScheme) release(t *target, token any, publish string, call *batch.Call) {
	mutexRelease(t, token, publish, releaseMode, noArg, call)
}

// mutexRelease prepares mutex_release.lua: a release (mode releaseMode) of token, or a
// process that stops waiting (leaveMode, with its id as me and its request's token).
func mutexRelease(t *target, token any, publish string, mode, me any, call *batch.Call) {
	call.Script = scripts.MutexRelease
	call.Keys, call.KeyArgs = t.mutexReleaseKeys, t.mutexReleaseKeyArgs
	var turn any = noArg // an RWMutex writer's release comes here too: it takes no turns
	if t.turns() {
		turn = t.c.turn.arg
	}
	call.Args = []any{token, t.channelArg, publishArg(publish), turn, grantLengthArg, mode, me}
}

func (mutexScheme) extend(t *target, token any, ttl string, set bool, call *batch.Call) {
	call.Script = scripts.MutexExtend
	call.Keys, call.KeyArgs = t.lockKeys, t.lockKeyArgs
	call.Args = []any{token, ttl, extendMode(set)}
}

// extendMode is the mode argument of the extend scripts: "set" sets the expiry, anything
// else only lengthens it.
func extendMode(set bool) any {
	if set {
		return setArg
	}
	return noArg
}

func (mutexScheme) leave(*target, *request, *batch.Call) bool { return false }
func (mutexScheme) need(n int) int                            { return quorum.Majority(n) }

func (mutexScheme) channels(t *target, r *request, n *node) []notify.Channel {
	released := releaseChannel(t, n)
	if t.turns() && !r.try {
		// The lock passed to another process wakes this one only once that could have
		// lapsed; a grant to this one comes with its details (turns.go).
		released.Process, released.Grants = t.turnID(), r.grants
		released.TurnLapse = t.c.turn.length + time.Millisecond
		released.GrantLapse = min(t.cfg.ttl, grantLength) + time.Millisecond
	}
	return []notify.Channel{released, keyspaceChannel(n, t.keys.Lock)}
}

func (mutexScheme) queued() bool     { return false }
func (mutexScheme) localQueue() bool { return true }
func (mutexScheme) stable() bool     { return false }
func (mutexScheme) reentrant() bool  { return true }
func (mutexScheme) handsOff() bool   { return true }
