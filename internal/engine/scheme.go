package engine

import (
	"strconv"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/notify"
)

// A scheme is how one kind of lock lives in Redis: which scripts take, renew and release
// it, with which keys and arguments, and how its waiters wait. The engine (attempt.go,
// wait.go, hold.go, renewal.go) is the same for every kind.
type scheme interface {
	kind() string
	// acquire prepares one attempt of r with the holder token of the attempt.
	acquire(t *Target, r *request, token any, call *batch.Call)
	// release prepares the end of the hold with token; publish is the publish command, or
	// "" to wake no one.
	release(t *Target, token any, publish string, call *batch.Call)
	// extend prepares the renewal of the hold with token for ttl milliseconds. It only
	// lengthens the lease in Redis, never shortens it: see Hold.extend.
	extend(t *Target, token any, ttl string, call *batch.Call)
	// leave prepares taking a waiter that gives up out of the wait lists; it reports false
	// for schemes that keep none.
	leave(t *Target, r *request, call *batch.Call) bool
	// need is how many of n nodes must agree.
	need(n int) int
	// channels are what a waiter listens on, on node n.
	channels(t *Target, r *request, n *Node) []notify.Channel
	// policy is how the kind waits and shares, apart from its scripts.
	policy() policy
}

// A tokenMaker is a scheme whose holders are not known by a fresh random token
// (attemptToken): it makes the token of each attempt on t (TimestampMutex: the deadlines
// that its hold writes).
type tokenMaker interface {
	newToken(t *Target) any
}

// An errorWrapper is a scheme that marks some of its nodes' errors (TimestampMutex: a key
// that holds no deadline wraps ErrNotTimestamp): a failed attempt's error, as Lock returns
// it and the observers see it, is what wrapError makes of it.
type errorWrapper interface {
	wrapError(err error) error
}

// The kinds of lock as the observers' events name them (scheme.kind; dlock's Kind constants).
const (
	KindMutex     = "mutex"
	KindFair      = "fair"
	KindRead      = "read"
	KindWrite     = "write"
	KindSemaphore = "semaphore"
	KindTimestamp = "timestamp"
	KindMulti     = "multi"
)

// A policy is what the engine asks of a kind beyond its scripts: how its waiters are
// known in Redis, how the goroutines of one process share the key, and whether a Lock may
// join a hold its ctx carries. Each kind declares one, next to its scripts.
type policy struct {
	// waitList: each request has an id (request.waiter) in a wait list in Redis, which its
	// attempts refresh, at least every waiterRefresh, and which it leaves (scheme.leave)
	// when it gives up. FairMutex, Semaphore, RWMutex writers.
	waitList bool
	// claim: every attempt asks with the request's waiter id, and a release may hand the
	// lock to that id while the attempt is out (FairMutex): an attempt is never undone,
	// only left. Implies waitList.
	claim bool
	// reentrant: a Lock whose ctx carries a live lease of the lock joins its hold.
	reentrant bool
	// coordinate: how the goroutines of one process share the key (coordinator.go).
	coordinate coordination
	// allOrNone: the hold is of several names at once (MultiMutex), and a hold lost on one
	// gives the others back rather than keep them until they expire (Hold.end).
	allOrNone bool
	// track: the lock key is a string that clients of other libraries also take (SET NX,
	// SETNX) and release (DEL, a script, GETSET), which publishes nothing: waiters track it
	// with CLIENT TRACKING, or re-check where a server refuses it (tracking.go). Mutex,
	// TimestampMutex.
	track bool
}

// coordination is how the goroutines of one process share a lock key.
type coordination int

const (
	alone        coordination = iota // each asks Redis on its own: no coordinator
	queueLocally                     // they queue locally; only the head asks Redis (RWMutex writers)
	hotKey                           // queueLocally, plus hand-off and turns (Mutex)
)

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
