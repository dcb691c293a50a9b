package dlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/seed51c676c8/dlock/internal/engine"
)

// Mutex is a distributed mutual-exclusion lock. A Mutex is a handle: it holds no state of
// its own in Redis until locked, it is safe for concurrent use, and any number of handles
// for the same name, in any number of processes, exclude each other.
//
// Its key is a plain string holding the holder's token, set with SET NX PX and released
// by compare-and-delete, so a Mutex of a Client made with WithPrefix("") also excludes,
// and is excluded by, Redlock clients in other languages on the same key.
type Mutex struct {
	t *engine.Target
}

// Mutex returns the mutex called name. An empty name or invalid option is reported by
// every method of the returned Mutex.
func (c *Client) Mutex(name string, opts ...LockOption) *Mutex {
	cfg, err := newLockConfig(opts)
	return &Mutex{t: engine.NewMutex(c.e, name, cfg, err)}
}

// Lock acquires the mutex, waiting until it is free or ctx is done. If ctx carries a live
// lease of this mutex from the same Client (a lease's Context, or a context derived from
// one), Lock re-enters at once and returns a lease that shares that hold.
//
// ctx bounds the wait and every request; when it ends first, the error wraps ctx.Err() and
// nothing is held. Lock waits for a lock that is held, but not for nodes that fail: after
// a few attempts in a row that reach no verdict (servers down, unreachable, hung or
// refusing), it returns their errors, each naming its node; errors that retrying cannot
// mend (credentials, permissions, a key of another type) are returned at once. The
// returned lease is renewed until Unlock unless NoRenew was given.
func (m *Mutex) Lock(ctx context.Context) (*Lease, error) { return handle(m.t.Lock(ctx, false)) }

// TryLock makes one attempt to acquire the mutex and returns an error wrapping
// ErrNotAcquired if it is held. Re-entry works as for Lock.
func (m *Mutex) TryLock(ctx context.Context) (*Lease, error) {
	return handle(m.t.Lock(ctx, true))
}

// Do runs fn while holding the mutex: Lock, fn with the lease's context, Unlock, also
// when fn panics (the panic then goes on). It returns fn's error; if the lease was lost
// while fn ran, the error also wraps ErrLost, since the work may have overlapped another
// holder's. fn should stop when its ctx is done; LeaseFrom(ctx) gives it the lease, for
// its fencing token. Do of every other kind has this contract.
func (m *Mutex) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	lease, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	return run(ctx, lease, fn)
}

// run runs fn under lease and unlocks it, also when fn panics (the panic goes on after
// the Unlock: a recovered panic must not leave the lock held).
func run(ctx context.Context, lease *Lease, fn func(ctx context.Context) error) (err error) {
	done := false
	defer func() {
		if !done {
			_ = finish(ctx, lease, nil)
		}
	}()
	fnErr := fn(lease.Context())
	done = true
	return finish(ctx, lease, fnErr)
}

// finish unlocks lease after fn returned fnErr and combines what went wrong.
func finish(ctx context.Context, lease *Lease, fnErr error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), engine.UnlockTimeout)
	defer cancel()
	if lease.Err() == ErrLost {
		_ = lease.Unlock(ctx)
		return errors.Join(fnErr, fmt.Errorf("dlock: %q: %w while the work ran", lease.Name(), engine.Inner(ErrLost)))
	}
	return errors.Join(fnErr, lease.Unlock(ctx))
}
