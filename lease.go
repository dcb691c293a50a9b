package dlock

import (
	"context"
	"time"

	"github.com/seed51c676c8/dlock/internal/engine"
)

// A Lease's state is the engine's lease: Lease is defined on it, so that what the engine
// returns is a *Lease by a conversion, allocated with its hold.

// Lease is one holding of a lock. It ends when it is unlocked or lost; after that it stays
// ended. Its methods are safe for concurrent use, from any goroutine.
//
// A Lease returned by re-entry (Lock with a context that carries a live lease of the same
// lock) shares the hold of the outer lease: same token, same deadline. Unlocking it ends
// only it; unlocking the outer lease releases the lock and ends them all.
type Lease engine.Lease

// public is how the engine makes this package's quorum errors.
var public = engine.Public{Error: quorumError}

// handle returns the public lease of what the engine returned.
func handle(l *engine.Lease, err error) (*Lease, error) { return (*Lease)(l), err }

// e is the engine's side of l.
func (l *Lease) e() *engine.Lease { return (*engine.Lease)(l) }

// LeaseFrom returns the lease that ctx carries: the lease whose Context ctx is, or was
// derived from (the innermost one when such contexts nest), of any Client. Inside Do, it
// is the lease of that Do, which is how fn gets at the fencing token. It returns the lease
// also after it has ended, so that work can see why its ctx was cancelled (Err is then
// ErrLost or ErrReleased); false only if ctx carries no lease.
func LeaseFrom(ctx context.Context) (*Lease, bool) {
	l := engine.LeaseFrom(ctx)
	return (*Lease)(l), l != nil
}

// Name returns the name of the lock; for a MultiMutex, its names joined by commas in the
// order given.
func (l *Lease) Name() string { return l.e().Name() }

// Token returns the fencing token: strictly greater than the token of every earlier
// acquisition of the same name, across processes and restarts of the client. Storage that
// remembers the largest token it has seen can refuse the writes of a stale holder.
// Re-entry does not change it.
func (l *Lease) Token() uint64 { return l.e().Token() }

// Tokens returns the fencing token of each name the lease holds: for a MultiMutex, one
// entry per name, each strictly greater than the token of every earlier acquisition of
// that name, by a Mutex or a MultiMutex, and Token is the largest; for any other lock, one
// entry, its name and Token. The map is new at each call.
func (l *Lease) Tokens() map[string]uint64 { return l.e().Tokens() }

// Context returns a context that carries the values of the ctx given to Lock (but not its
// deadline or cancellation) and this lease, and that is cancelled, with ErrLost or
// ErrReleased as its cause, when the lease ends. Work done under the lock should use it:
// it is how that work learns it must stop.
func (l *Lease) Context() context.Context { return l.e().Context() }

// Done returns a channel that is closed when the lease ends, released or lost.
func (l *Lease) Done() <-chan struct{} { return l.e().Done() }

// Err returns nil while the lease is held, then ErrReleased or ErrLost (exactly those
// values).
func (l *Lease) Err() error { return l.e().Err() }

// ValidUntil returns the instant, on the local clock, until which exclusivity is
// guaranteed: the start of the last successful request, plus the TTL, minus the drift
// allowance. It moves forward with each renewal and Extend.
func (l *Lease) ValidUntil() time.Time { return l.e().ValidUntil() }

// Extend makes the lease last ttl from now and makes ttl the length of later renewals. ctx
// bounds the request. If Redis says the key is no longer ours, the lease is lost and
// Extend returns ErrNotHeld. Otherwise, on failure, an Extend that would lengthen the lease
// leaves it unchanged. One that shortens it (ttl below the current length) takes effect
// when it is called, whatever the reply: ValidUntil moves down to at most now plus ttl,
// and later renewals use ttl. It shortens the lease, not the key: Redis keeps the key
// until its expiry as it was, since a request that lands late must never cut a key that a
// later one lengthened. Others can take the lock once that expiry passes, or at once
// after Unlock.
func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error { return l.e().Extend(ctx, ttl) }

// Unlock ends the lease. For the outer lease it releases the lock in Redis and wakes the
// next waiter; ctx bounds the request, and a ctx that has already ended gets the per-node
// timeout instead, so that a deferred Unlock with an expired request context still
// releases. After Unlock returns, the lease has ended whatever the result: if the release
// failed (Redis unreachable), the key expires by itself within its TTL. Unlock of a lease
// that has already ended returns ErrNotHeld.
func (l *Lease) Unlock(ctx context.Context) error { return l.e().Unlock(ctx) }
