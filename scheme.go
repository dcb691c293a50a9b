package dlock

import (
	"fmt"
	"strconv"

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
	acquire(t *target, r *request, token string, call *batch.Call)
	// release prepares the end of the hold with token; publish is the publish command, or
	// "" to wake no one.
	release(t *target, token, publish string, call *batch.Call)
	// extend prepares the renewal of the hold with token for ttl milliseconds.
	extend(t *target, token, ttl string, call *batch.Call)
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
}

// request is one call of Lock, TryLock, Acquire...: what all its attempts share.
type request struct {
	waiter string // the caller's id in Redis wait lists; stable across its attempts
	owner  string // RWMutex downgrade: the token of the write lease the caller holds
	n      int64  // Semaphore: the permits asked for
	try    bool   // one attempt, never wait
}

// Wait-list entries live this long unless their waiter refreshes them, which it does every
// waiterRefresh: a waiter that dies is skipped within waiterTTL.
const (
	waiterTTL     = 3000 // milliseconds
	waiterRefresh = waiterTTL / 3
)

var waiterTTLArg = strconv.Itoa(waiterTTL)

func ms(ttlMillis int64) string { return strconv.FormatInt(ttlMillis, 10) }

func tryArg(try bool) string {
	if try {
		return "1"
	}
	return "0"
}

func keyspaceChannel(n *node, key string) notify.Channel {
	return notify.Channel{Name: fmt.Sprintf("__keyspace@%d__:%s", n.db, key)}
}

func releaseChannel(t *target, n *node) notify.Channel {
	return notify.Channel{Name: t.keys.Channel, Sharded: n.cluster}
}

// mutexScheme: a plain string key holding the holder's token (SET NX PX, compare-and-delete).
type mutexScheme struct{}

func (mutexScheme) kind() string { return "mutex" }

func (mutexScheme) acquire(t *target, _ *request, token string, call *batch.Call) {
	call.Script = scripts.MutexAcquire
	call.Keys = []string{t.keys.Lock, t.keys.Fence}
	call.Args = []any{token, ms(t.cfg.ttl.Milliseconds())}
}

func (mutexScheme) release(t *target, token, publish string, call *batch.Call) {
	call.Script = scripts.MutexRelease
	call.Keys = []string{t.keys.Lock}
	call.Args = []any{token, t.keys.Channel, publish}
}

func (mutexScheme) extend(t *target, token, ttl string, call *batch.Call) {
	call.Script = scripts.MutexExtend
	call.Keys = []string{t.keys.Lock}
	call.Args = []any{token, ttl}
}

func (mutexScheme) leave(*target, *request, *batch.Call) bool { return false }
func (mutexScheme) need(n int) int                            { return quorum.Majority(n) }

func (mutexScheme) channels(t *target, _ *request, n *node) []notify.Channel {
	return []notify.Channel{releaseChannel(t, n), keyspaceChannel(n, t.keys.Lock)}
}

func (mutexScheme) queued() bool     { return false }
func (mutexScheme) localQueue() bool { return true }
func (mutexScheme) stable() bool     { return false }
func (mutexScheme) reentrant() bool  { return true }
