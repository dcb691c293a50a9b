package dlock

import (
	"context"

	"github.com/seed51c676c8/dlock/internal/engine"
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
// A waiter that was handed the lock, or gave up, leaves the queue for good: for 10
// seconds Redis remembers its id, so that a request of it delivered late (after its
// caller gave up, resent on a new connection) neither queues it again nor takes the lock.
//
// Unlike Mutex, goroutines of one process do not queue locally: each has its own place
// in the Redis queue, which is what strict order across processes requires, and each
// hand-over goes through Redis. A FairMutex needs one Redis deployment: independent
// nodes cannot agree on one order by voting, so on a quorum Client every method returns
// an error.
type FairMutex struct {
	t *engine.Target
}

// FairMutex returns the fair mutex called name. Do not use the same name for a Mutex: it
// would not see the queue.
func (c *Client) FairMutex(name string, opts ...LockOption) *FairMutex {
	cfg, err := newLockConfig(opts)
	return &FairMutex{t: engine.NewFairMutex(c.e, name, cfg, err)}
}

// Lock joins the queue and waits until the lock is handed over or free and this caller is
// first, or until ctx is done (then the caller leaves the queue and the error wraps
// ctx.Err()). Re-entry by context works as for Mutex.Lock.
func (m *FairMutex) Lock(ctx context.Context) (*Lease, error) { return handle(m.t.Lock(ctx, false)) }

// TryLock takes the lock only if it is free and no one waits; it never joins the queue.
func (m *FairMutex) TryLock(ctx context.Context) (*Lease, error) {
	return handle(m.t.Lock(ctx, true))
}

// Do runs fn while holding the lock, like Mutex.Do.
func (m *FairMutex) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	lease, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	return run(ctx, lease, fn)
}
