package dlock

import (
	"context"

	"github.com/seed51c676c8/dlock/internal/inspect"
)

// ErrLockChanged is what ForceUnlock reports for a node where the lock was taken again
// between each of its readings and the removal that followed, 5 times in a row (forceRounds):
// a lock that busy is in use, not stuck, and nothing was removed there.
var ErrLockChanged = inspect.ErrLockChanged

// ForceUnlock removes the lock called name whoever holds it, whatever its kind, on every
// node: the lock key (a holder's token, a Semaphore's holders), an RWMutex's readers, a
// Semaphore's permits. It is for operators, for a lock whose holder is stuck or gone: a
// holder that still runs learns of it only at its next renewal (its lease then ends with
// ErrLost), so until then only fencing tokens protect the data it writes.
//
// It removes only what it has seen. On each node it first reads the lock, then sends the
// removal with the fencing counter and the lock key's value it read, and Redis removes
// the lock only if both are unchanged: every acquisition raises the counter, so a lease
// taken after the reading is never removed, also when the removal reaches Redis after
// ctx ended (a lost reply, a resent request). When a lease was taken in between, the
// removal changes nothing and ForceUnlock tries again with what is there now, up to
// 5 times (forceRounds); a node where the lock changed hands every time fails with
// ErrLockChanged. So it removes whoever holds the lock at one instant of the call, and
// reports exactly that: a lock that keeps changing hands is not stuck, and removing its
// newest holder is not what the call is for.
//
// It keeps the fencing counter, so that the next holder gets a larger token, and the
// wait lists (queues, turns, waiting writers), whose waiters it wakes: they take the lock
// in their order. It reports what it removed, as Inspect would have read it just before,
// per node in Nodes.
//
// ctx bounds the whole call. When a node fails (or ctx ends first), ForceUnlock returns
// the other nodes' reports with a *QuorumError naming each failing node: the lock may
// still be there on those nodes; run it again. A node whose keys hold something no lock
// writes fails with ErrNotLock, and nothing is removed there.
func (c *Client) ForceUnlock(ctx context.Context, name string) (*LockInfo, error) {
	in, err := inspect.ForceUnlock(ctx, c.e, name)
	return lockInfo(in), err
}
