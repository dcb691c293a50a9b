package engine

import (
	"context"

	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// Target is what every lock handle has in common: which lock, and how to hold it. Each
// kind's constructor makes one with its scheme (newTarget); what is the kind's own lives in
// the scheme and in its sharing.
type Target struct {
	c      *Client
	scheme scheme
	policy policy  // scheme.policy()
	share  sharing // scheme.sharing(): how this process's goroutines share the key
	name   string
	keys   keyspace.Keys
	cfg    LockConfig
	err    error // an invalid name or option, returned by every method
	// parts are what each step sends a call for, on every node: the Target itself, or a
	// MultiMutex over several Redis Cluster hash slots, one Target per slot, taken in this
	// order (multi_parts.go).
	parts []*Target
	// attempt makes one attempt: acquireOnce, or a MultiMutex's over several hash slots.
	attempt func(ctx, lockCtx context.Context, r *request) attempt
	// hooks are what a hold of t does as it starts and ends (Hold.start, Hold.end).
	hooks holdHooks

	// Script arguments that do not change between calls, made (and boxed) once.
	ttlArg     any      // cfg.TTL in milliseconds
	lockKeys   []string // the lock key alone; read-only
	extendKeys []string // lock, gone: the extend of a one-key kind (mutex_extend, stamp_extend); read-only
	fenceKeys  []string // the fencing counter alone; read-only

	// The same keys boxed for go-redis (batch.Call.KeyArgs), so that a call does not box
	// them again.
	lockKeyArgs, extendKeyArgs []any
}

// newTarget returns the Target of name whose scheme newScheme makes, once the Target's keys
// are known; cfgErr is an invalid option.
func newTarget(c *Client, name string, cfg LockConfig, cfgErr error, newScheme func(t *Target) scheme) *Target {
	t := &Target{c: c, name: name, cfg: cfg, err: cfgErr, attempt: acquireOnce}
	if t.err == nil {
		t.keys, t.err = keyspace.For(c.cfg.Prefix, name)
	}
	t.parts = []*Target{t}
	t.ttlArg = ms(t.cfg.TTL.Milliseconds())
	t.lockKeys = []string{t.keys.Lock}
	t.extendKeys = []string{t.keys.Lock, t.keys.Gone}
	t.fenceKeys = []string{t.keys.Fence}
	t.lockKeyArgs, t.extendKeyArgs = boxed(t.lockKeys), boxed(t.extendKeys)
	t.hooks = holdHooks{start: c.local.adopt, end: func(h *Hold, _ error, reason string) {
		c.local.forget(h)
		if reason == reasonExpired {
			// The key may outlive the lease (an Extend shortened the lease, not the key;
			// a renewal landed after the deadline): it is given back if it still holds the
			// token, so that waiters need not wait for it to expire. A token is never
			// reused, so that release is harmless whenever it lands.
			releaseAbandoned(h.t, h.token, true)
		}
	}}
	t.scheme = newScheme(t)
	t.policy, t.share = t.scheme.policy(), t.scheme.sharing(t)
	return t
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
func (t *Target) LocalWaiters() int { return t.c.local.waiting(t.keys.Lock) }
