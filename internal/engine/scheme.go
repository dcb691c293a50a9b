package engine

import (
	"context"
	"strconv"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/notify"
)

// A scheme is one kind of lock: how it lives in Redis (which scripts take, renew and
// release it, with which keys and arguments), how its waiters wait, and how the goroutines
// of one process share it (its sharing). The engine (attempt.go, wait.go, hold.go,
// renewal.go) is the same for every kind and asks the scheme; a kind is its scheme's file
// and the constructor there that registers it (NewMutex, NewFairMutex...).
type scheme interface {
	kind() string
	// acquire prepares one attempt of r with the ticket a.
	acquire(t *Target, r *request, a *ticket, call *batch.Call)
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
	// policy is how the kind waits, apart from its scripts.
	policy() policy
	// sharing is how the goroutines of this process share t's key (sharing.go).
	sharing(t *Target) sharing
	// newToken makes the holder token of an attempt that is no claim (random.go's
	// newToken, or the TimestampMutex's stamp).
	newToken(t *Target) any
	// wrapError marks a failed attempt's error, as Lock returns it and the observers see
	// it (the TimestampMutex's ErrNotTimestamp); most kinds return it as it is.
	wrapError(err error) error
	// exclusive are the lock keys a hold of t holds alone: a Lock of any kind on one of
	// them waits until the hold ends (reentry.go). A reader or a permit holds none.
	exclusive(t *Target) []string
	// names are the names a hold of t holds, each with the hold's fencing token
	// (Lease.Tokens); fenceKeys are their counters, which a quorum raises to the
	// majority's token (fence.go).
	names(t *Target) []string
	fenceKeys(t *Target) []string
	// waitsFor reports whether a Lock of this kind waits for other, a hold of another kind
	// that holds its lock key alone (reentry.go); selfWait is the error of a Lock of r that
	// the leases ctx carries keep out otherwise, or nil.
	waitsFor(other *Hold) bool
	selfWait(ctx context.Context, r *request) error
}

// plain gives a scheme the common answers: a random token, errors as they are, every name
// its own (the lock's).
type plain struct{}

func (plain) newToken(t *Target) any                    { return t.c.newToken() }
func (plain) wrapError(err error) error                 { return err }
func (plain) leave(*Target, *request, *batch.Call) bool { return false }
func (plain) names(t *Target) []string                  { return []string{t.name} }
func (plain) fenceKeys(t *Target) []string              { return t.fenceKeys }
func (plain) exclusive(t *Target) []string              { return t.lockKeys }
func (plain) sharing(*Target) sharing                   { return alone{} }
func (plain) waitsFor(*Hold) bool                       { return true }
func (plain) selfWait(context.Context, *request) error  { return nil }

// The kinds of lock as the observers' events name them (scheme.kind; dlock's Kind constants).
const (
	KindMutex     = "mutex"
	KindFair      = "fair"
	KindRead      = "read"
	KindWrite     = "write"
	KindSemaphore = "semaphore"
	KindTimestamp = "timestamp"
	KindMulti     = "multi"
	KindElection  = "election"
)

// A policy is what the engine asks of a kind beyond its scripts and its sharing. Each
// kind declares one, next to its scripts.
type policy struct {
	// waitList: each request has an id (request.waiter) in a wait list in Redis, which its
	// attempts refresh, at least every waiterRefresh, and which it leaves (scheme.leave)
	// when it gives up. FairMutex, Semaphore, RWMutex writers.
	waitList bool
	// reentrant: a Lock whose ctx carries a live lease of the lock joins its hold.
	reentrant bool
	// track: the lock key is a string that clients of other libraries also take (SET NX,
	// SETNX) and release (DEL, a script, GETSET), which publishes nothing: waiters track it
	// with CLIENT TRACKING, or re-check where a server refuses it (tracking.go). Mutex,
	// TimestampMutex.
	track bool
	// listenFirst: a wait listens before its first attempt, without a round trip, where
	// its channels are subscribed already (waiting.listenFirst). FairMutex.
	listenFirst bool
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

// boxed returns keys as go-redis takes them (batch.Call.KeyArgs), boxed once.
func boxed(keys []string) []any {
	b := make([]any, len(keys))
	for i, k := range keys {
		b[i] = k
	}
	return b
}
