package dlock

import (
	"context"

	"github.com/seed51c676c8/dlock/internal/engine"
)

// MultiMutex locks several names at once, all or none: a transfer between two accounts,
// stock moved between two warehouses. A MultiMutex is a handle: it holds no state of its
// own in Redis until locked, it is safe for concurrent use, and any number of handles, in
// any number of processes, exclude each other on every name they share.
//
// Each name keeps the keys of a Mutex of that name, so a MultiMutex excludes, and is
// excluded by, a Mutex of each of its names; a Mutex waiter on one of the names is woken,
// or handed the lock in its turn, when the MultiMutex releases it, as by a Mutex release.
//
// The names are taken in one fixed order, the same for every process: on one server, and
// on each node of a quorum, all of them by one script, which takes them only if none is
// held; on a Redis Cluster, one script per hash slot (names that share a hash tag share a
// slot), the slots in order, and a slot refused gives back the slots taken before it.
// A MultiMutex never holds some of its names while it waits for the others, so two
// MultiMutexes over overlapping sets cannot deadlock. When Lock or TryLock returns an
// error, none of the names is held by it: on one server or a Cluster, what it took is
// given back before the error returns where the nodes answer in time; a node that does
// not lets those keys live until their TTL, and the undo of a refused node's own grant is
// sent without waiting, so its keys can outlive the error briefly; on a quorum, what a
// minority of nodes granted is released as the attempt ends, as for a Mutex.
//
// The Lease of a MultiMutex covers every name: it is renewed for all of them together,
// and lost when any of them is lost (its key expired, deleted or taken), at which point
// the other names are given back. Lease.Tokens gives each name's fencing token, and Token
// the largest; a MultiMutex gives all its names the same token, above the earlier tokens
// of each of them.
//
// A MultiMutex takes no turns: where Mutex processes keep one of its names busy, passing
// it from one to the next, it gets that name only once none of them waits for it.
type MultiMutex struct {
	m *engine.Multi
}

// MultiMutex returns the lock of names, all or none. Their order does not matter. An empty
// list, an empty or invalid name, a name given twice or an invalid option is reported by
// every method of the returned MultiMutex.
func (c *Client) MultiMutex(names []string, opts ...LockOption) *MultiMutex {
	cfg, err := newLockConfig(opts)
	return &MultiMutex{m: engine.NewMultiMutex(c.e, names, cfg, err)}
}

// Lock acquires every name, waiting until they are all free at once or ctx is done. It
// waits without polling: it wakes when a name that refused it is released (by any dlock
// lock), and at the latest when its holder's lease would run out.
//
// ctx bounds the wait and every request; when it ends first, the error wraps ctx.Err() and
// nothing is held. Failing nodes are reported as by Mutex.Lock. A MultiMutex is not
// re-entrant: with a ctx that carries a live lease of the same Client on one of the names
// (of a Mutex or a MultiMutex), Lock returns an error at once rather than wait for itself.
// The returned lease is renewed until Unlock unless NoRenew was given.
func (m *MultiMutex) Lock(ctx context.Context) (*Lease, error) { return handle(m.m.Lock(ctx, false)) }

// TryLock makes one attempt to acquire every name and returns an error wrapping
// ErrNotAcquired if one of them is held; it then holds none of them.
func (m *MultiMutex) TryLock(ctx context.Context) (*Lease, error) { return handle(m.m.Lock(ctx, true)) }

// Do runs fn while holding every name: Lock, fn with the lease's context, Unlock. It
// returns fn's error; if the lease was lost while fn ran, the error also wraps ErrLost.
// fn should stop when its ctx is done.
func (m *MultiMutex) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	lease, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	return run(ctx, lease, fn)
}
