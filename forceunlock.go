package dlock

import (
	"context"

	"github.com/seed51c676c8/dlock/internal/engine"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// ForceUnlock removes the lock called name whoever holds it, whatever its kind, on every
// node: the lock key (a holder's token, a Semaphore's holders), an RWMutex's readers, a
// Semaphore's permits. It is for operators, for a lock whose holder is stuck or gone: a
// holder that still runs learns of it only at its next renewal (its lease then ends with
// ErrLost), so until then only fencing tokens protect the data it writes.
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
	keys, err := c.inspectKeys(name)
	if err != nil {
		return nil, err
	}
	return c.readLock(ctx, "force-unlock", name, keys, func(ctx context.Context, n *engine.Node) (NodeInfo, error) {
		return runLockScript(ctx, n, keys, scripts.ForceUnlock, keys.Channel, n.PublishCommand(), keys.GrantedPrefix())
	})
}
