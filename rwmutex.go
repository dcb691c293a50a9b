package dlock

import (
	"context"

	"github.com/seed51c676c8/dlock/internal/engine"
)

// RWMutex is a distributed reader/writer lock: any number of readers or one writer.
//
// A writer that waits keeps new readers out, so a stream of readers cannot starve it;
// readers that hold the lock keep it until they leave. Each reader is its own lease: a
// dead reader's hold ends with its own TTL, without shortening or lengthening the others'.
//
// Re-entry by context works for both modes. A writer may take the read lock with its write
// lease's context (downgrade): the read lease is granted at once and outlives the write
// lease if the writer then unlocks it. The reverse, Lock with a read lease's context
// (upgrade), is refused with an error at once: two readers upgrading together would wait
// for each other forever.
//
// On a quorum Client both modes count with a majority: a writer's majority and any
// reader's majority share a node, which refuses one of them.
type RWMutex struct {
	rw *engine.RW
}

// RWMutex returns the reader/writer lock called name.
func (c *Client) RWMutex(name string, opts ...LockOption) *RWMutex {
	cfg, err := newLockConfig(opts)
	return &RWMutex{rw: engine.NewRWMutex(c.e, name, cfg, err)}
}

// RLock takes a read lock, waiting while a writer holds the lock or waits for it, until ctx
// is done.
func (rw *RWMutex) RLock(ctx context.Context) (*Lease, error) { return handle(rw.rw.RLock(ctx, false)) }

// TryRLock makes one attempt to take a read lock; ErrNotAcquired if a writer holds the lock
// or waits for it.
func (rw *RWMutex) TryRLock(ctx context.Context) (*Lease, error) {
	return handle(rw.rw.RLock(ctx, true))
}

// Lock takes the write lock, waiting until no reader or writer holds it, until ctx is done.
// While it waits, new readers wait too.
func (rw *RWMutex) Lock(ctx context.Context) (*Lease, error) { return handle(rw.rw.Lock(ctx, false)) }

// TryLock makes one attempt to take the write lock; ErrNotAcquired if anyone holds it.
func (rw *RWMutex) TryLock(ctx context.Context) (*Lease, error) { return handle(rw.rw.Lock(ctx, true)) }

// Do runs fn while holding the write lock, like Mutex.Do.
func (rw *RWMutex) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	lease, err := rw.Lock(ctx)
	if err != nil {
		return err
	}
	return run(ctx, lease, fn)
}

// RDo runs fn while holding a read lock, like Mutex.Do; other readers may run at once.
func (rw *RWMutex) RDo(ctx context.Context, fn func(ctx context.Context) error) error {
	lease, err := rw.RLock(ctx)
	if err != nil {
		return err
	}
	return run(ctx, lease, fn)
}
