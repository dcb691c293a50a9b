package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// Target is what every lock handle has in common: which lock, and how to hold it.
type Target struct {
	c      *Client
	scheme scheme
	policy policy       // scheme.policy()
	coord  *coordinator // how this process's goroutines share the key; nil: they do not
	name   string
	keys   keyspace.Keys
	cfg    LockConfig
	err    error // an invalid name or option, returned by every method
	// parts: a MultiMutex over several Redis Cluster hash slots is one Target per slot,
	// taken in this order (multi.go); nil for every other lock.
	parts []*Target

	// Script arguments that do not change between calls, made (and boxed) once.
	ttlArg           any      // cfg.TTL in milliseconds
	turnsLifeArg     any      // Mutex: how long a turn list outlives its last change, in ms
	turnIDArg        any      // Mutex: turnID()
	channelArg       any      // keys.Channel
	mutexKeys        []string // Mutex acquire: lock, fence, turns, asks, gone; read-only
	mutexReleaseKeys []string // Mutex release: lock, turns, fence, asks, gone; read-only
	lockKeys         []string // the lock key alone; read-only
	extendKeys       []string // extend of a one-key kind (mutex_extend, stamp_extend): lock, gone; read-only

	// The same keys boxed for go-redis (batch.Call.KeyArgs), so that a call does not box
	// them again.
	mutexKeyArgs, mutexReleaseKeyArgs, lockKeyArgs, extendKeyArgs []any
}

func newTarget(c *Client, s scheme, name string, cfg LockConfig, cfgErr error) *Target {
	t := &Target{c: c, scheme: s, policy: s.policy(), name: name, cfg: cfg, err: cfgErr}
	t.coord = newCoordinator(t)
	if t.err == nil {
		t.keys, t.err = keyspace.For(c.cfg.Prefix, name)
	}
	t.ttlArg = ms(t.cfg.TTL.Milliseconds())
	// Waiters refresh the list at least once per holder's TTL (their expiry hint).
	t.turnsLifeArg = ms(max(3*t.cfg.TTL, time.Minute).Milliseconds())
	t.turnIDArg = t.coord.turnID()
	t.channelArg = t.keys.Channel
	t.mutexKeys = []string{t.keys.Lock, t.keys.Fence, t.keys.Turns, t.keys.Asks, t.keys.Gone}
	t.mutexReleaseKeys = []string{t.keys.Lock, t.keys.Turns, t.keys.Fence, t.keys.Asks, t.keys.Gone}
	t.lockKeys = []string{t.keys.Lock}
	t.extendKeys = []string{t.keys.Lock, t.keys.Gone}
	t.mutexKeyArgs, t.mutexReleaseKeyArgs = boxed(t.mutexKeys), boxed(t.mutexReleaseKeys)
	t.lockKeyArgs, t.extendKeyArgs = boxed(t.lockKeys), boxed(t.extendKeys)
	return t
}

func boxed(keys []string) []any {
	b := make([]any, len(keys))
	for i, k := range keys {
		b[i] = k
	}
	return b
}

// releaseAbandoned releases token on every node without waiting for the replies: it undoes
// a failed attempt. Nodes where the token is absent answer 0 and nothing changes. With
// wake false it wakes no one: see mutex_release.lua. A node too backed up to take the call
// lets the key expire by itself.
func (t *Target) releaseAbandoned(token any, wake bool) {
	for _, p := range t.parts {
		p.releaseAbandoned(token, wake)
	}
	if t.parts != nil {
		return
	}
	sendEvery(t.c, t.cfg.TTL, func(call *batch.Call) bool {
		publish := ""
		if wake {
			publish = t.c.nodes[call.Node].PublishCommand()
		}
		t.scheme.release(t, token, publish, call)
		return true
	})
}

// gaveUpAfter is gaveUp with what the last attempt ran into, if it failed.
func (t *Target) gaveUpAfter(ctx context.Context, left time.Duration, lastErr error) error {
	if lastErr == nil {
		return t.gaveUp(ctx, left)
	}
	return fmt.Errorf("%w; the last attempt: %w", t.gaveUp(ctx, left), lastErr)
}

// gaveUp is the error of a wait that ctx ended; it wraps ctx.Err().
func (t *Target) gaveUp(ctx context.Context, left time.Duration) error {
	if left >= 0 {
		return fmt.Errorf("dlock: lock %q: gave up waiting: %w (the holder's lease had %v left)", t.name, ctx.Err(), left)
	}
	return fmt.Errorf("dlock: lock %q: gave up waiting: %w", t.name, ctx.Err())
}

// Lock acquires t: one attempt if try is set, else waiting until ctx is done.
func (t *Target) Lock(ctx context.Context, try bool) (*Lease, error) {
	return (&request{t: t, try: try}).lock(ctx)
}

// Acquire takes n of t's permits (a Semaphore): one attempt if try is set.
func (t *Target) Acquire(ctx context.Context, n int64, try bool) (*Lease, error) {
	return (&request{t: t, n: n, try: try}).lock(ctx)
}

// Err is the error of an invalid name or option, returned by every method.
func (t *Target) Err() error { return t.err }

// Name is the lock's name.
func (t *Target) Name() string { return t.name }

// LocalWaiters returns how many goroutines of t's Client wait for t in its local queue,
// for tests.
func (t *Target) LocalWaiters() int {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.queues[t.keys.Lock]; q != nil {
		return len(q.waiters)
	}
	return 0
}

// LeaveTurns sends t's leave of the turns for a standing request with token ask, as the
// last local waiter that gives up does, for tests.
func (t *Target) LeaveTurns(ask string) {
	t.coord.leaveTurns(&mutexAsk{token: ask})
}
