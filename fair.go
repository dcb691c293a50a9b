package dlock

import (
	"context"
	"errors"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// FairMutex is a mutex granted strictly in request order, across all processes: a queue in
// Redis records each waiter when it first asks. Release hands the lock to the next live
// waiter inside the release script and wakes that waiter alone, so there is no thundering
// herd and no one can barge in between.
//
// A waiter keeps its place by refreshing it every second while it waits; a waiter that
// gives up leaves at once, and one that dies is skipped within 3 seconds (its entry
// expires). The waiter that is handed the lock holds it without a round trip of its
// own: its lease started on its own clock before it first asked, which was before the
// hand-over, and its first renewal extends the hand-over (3 seconds) to the TTL. If it
// died, the hand-over expires after 3 seconds and the next waiter takes over.
//
// Unlike Mutex, goroutines of one process do not queue locally: each has its own place
// in the Redis queue, which is what strict order across processes requires. A FairMutex
// needs one Redis deployment: independent nodes cannot agree on one order by voting,
// so on a quorum Client every method returns an error.
type FairMutex struct {
	t *target
}

// errFairQuorum is the error of a FairMutex on a quorum Client.
var errFairQuorum = errors.New("dlock: FairMutex needs a single Redis deployment: independent quorum nodes cannot agree on one queue order without consensus; use Mutex on a quorum, or a FairMutex on one deployment (standalone, Sentinel or Cluster)")

// FairMutex returns the fair mutex called name. Do not use the same name for a Mutex: it
// would not see the queue.
func (c *Client) FairMutex(name string, opts ...LockOption) *FairMutex {
	t := newTarget(c, fairScheme{}, name, opts)
	if t.err == nil && len(c.nodes) > 1 {
		t.err = errFairQuorum
	}
	return &FairMutex{t: t}
}

// Lock joins the queue and waits until the lock is handed over or free and this caller is
// first, or until ctx is done (then the caller leaves the queue and the error wraps
// ctx.Err()). Re-entry by context works as for Mutex.Lock.
func (m *FairMutex) Lock(ctx context.Context) (*Lease, error) { return m.t.lock(ctx, &request{}) }

// TryLock takes the lock only if it is free and no one waits; it never joins the queue.
func (m *FairMutex) TryLock(ctx context.Context) (*Lease, error) {
	return m.t.lock(ctx, &request{try: true})
}

// Do runs fn while holding the lock, like Mutex.Do.
func (m *FairMutex) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	lease, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	return run(ctx, lease, fn)
}

// fairScheme: the lock key of a Mutex plus a queue of waiter tokens and their deadlines.
type fairScheme struct{}

func (fairScheme) kind() string { return "fair" }

func fairKeys(t *target) []string {
	return []string{t.keys.Lock, t.keys.Fence, t.keys.Queue(), t.keys.QueueDeadlines()}
}

// waiterChannel is where a waiter is told that the lock was handed to it.
func waiterChannelPrefix(t *target) string { return t.keys.GrantedPrefix() }

func (fairScheme) acquire(t *target, r *request, token any, call *batch.Call) {
	call.Script = scripts.FairAcquire
	call.Keys = fairKeys(t)
	call.Args = []any{token, t.ttlArg, waiterTTLArg, flagArg(r.try)}
}

func (fairScheme) release(t *target, token any, publish string, call *batch.Call) {
	fairRelease(t, token, publish, "release", call)
}

func fairRelease(t *target, token any, publish, mode string, call *batch.Call) {
	if publish == "" {
		publish = t.c.nodes[call.Node].publishCommand() // a hand-over always tells its waiter
	}
	call.Script = scripts.FairRelease
	call.Keys = fairKeys(t)
	call.Args = []any{token, waiterTTLArg, waiterChannelPrefix(t), publish, mode}
}

func (fairScheme) extend(t *target, token any, ttl string, set bool, call *batch.Call) {
	mutexScheme{}.extend(t, token, ttl, set, call)
}

func (fairScheme) leave(t *target, r *request, call *batch.Call) bool {
	fairRelease(t, r.waiter, "", "leave", call)
	return true
}

func (fairScheme) need(n int) int { return mutexScheme{}.need(n) }

func (fairScheme) channels(t *target, r *request, n *node) []notify.Channel {
	return []notify.Channel{
		// The hand-over comes with its details: the waiter holds the lock at once.
		{Name: waiterChannelPrefix(t) + r.waiter, Sharded: n.cluster, Once: true, Route: routeGrants(r.waiter, r.grants, 0, 0)},
		keyspaceChannel(n, t.keys.Lock),
	}
}

func (fairScheme) policy() policy { return policy{waitList: true, claim: true, reentrant: true} }
