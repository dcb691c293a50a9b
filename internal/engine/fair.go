package engine

import (
	"errors"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// errFairQuorum is the error of a FairMutex on a quorum Client.
var errFairQuorum = errors.New("dlock: FairMutex needs a single Redis deployment: independent quorum nodes cannot agree on one queue order without consensus; use Mutex on a quorum, or a FairMutex on one deployment (standalone, Sentinel or Cluster)")

// NewFairMutex returns the engine of the FairMutex called name; cfgErr is an invalid
// option. On a quorum Client every method returns an error.
func NewFairMutex(c *Client, name string, cfg LockConfig, cfgErr error) *Target {
	t := newTarget(c, fairScheme{}, name, cfg, cfgErr)
	if t.err == nil && len(c.nodes) > 1 {
		t.err = errFairQuorum
	}
	return t
}

// fairScheme: the lock key of a Mutex plus a queue of waiter tokens and their deadlines.
type fairScheme struct{}

func (fairScheme) kind() string { return KindFair }

func fairKeys(t *Target) []string {
	return []string{t.keys.Lock, t.keys.Fence, t.keys.Queue(), t.keys.QueueDeadlines(), t.keys.Gone}
}

// waiterChannel is where a waiter is told that the lock was handed to it.
func waiterChannelPrefix(t *Target) string { return t.keys.GrantedPrefix() }

func (fairScheme) acquire(t *Target, r *request, token any, call *batch.Call) {
	call.Script = scripts.FairAcquire
	call.Keys = fairKeys(t)
	call.Args = []any{token, t.ttlArg, waiterTTLArg, flagArg(r.try)}
}

func (fairScheme) release(t *Target, token any, publish string, call *batch.Call) {
	fairRelease(t, token, publish, releaseMode, call)
}

// fairRelease prepares fair_release.lua: a release (mode releaseMode) of token, or a waiter
// that gives up (leaveMode).
func fairRelease(t *Target, token any, publish string, mode any, call *batch.Call) {
	if publish == "" {
		publish = t.c.nodes[call.Node].PublishCommand() // a hand-over always tells its waiter
	}
	call.Script = scripts.FairRelease
	call.Keys = fairKeys(t)
	call.Args = []any{token, waiterTTLArg, waiterChannelPrefix(t), publishArg(publish), mode}
}

func (fairScheme) extend(t *Target, token any, ttl string, call *batch.Call) {
	mutexScheme{}.extend(t, token, ttl, call)
}

func (fairScheme) leave(t *Target, r *request, call *batch.Call) bool {
	fairRelease(t, r.waiter, "", leaveMode, call)
	return true
}

func (fairScheme) need(n int) int { return mutexScheme{}.need(n) }

func (fairScheme) channels(t *Target, r *request, n *Node) []notify.Channel {
	return []notify.Channel{
		// The hand-over comes with its details: the waiter holds the lock at once.
		{Name: waiterChannelPrefix(t) + r.waiter, Sharded: n.cluster, Once: true, Route: routeGrants(r.waiter, r.grants, 0, 0)},
		n.keyspaceChannel(t.keys.Lock),
	}
}

func (fairScheme) policy() policy {
	return policy{waitList: true, claim: true, reentrant: true}
}
