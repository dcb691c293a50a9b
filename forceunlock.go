package dlock

import (
	"context"
	"errors"
	"fmt"

	"github.com/seed51c676c8/dlock/internal/engine"
	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// ErrLockChanged is what ForceUnlock reports for a node where the lock was taken again
// between each of its readings and the removal that followed, 5 times in a row (forceRounds):
// a lock that busy is in use, not stuck, and nothing was removed there.
var ErrLockChanged = errors.New("dlock: the lock changed hands on every try: it is in use, not stuck; nothing was removed")

// forceRounds bounds the removals ForceUnlock sends to one node. A stuck lock does not
// change, so the first lands; each further round follows an acquisition that came between
// a reading and its removal.
const forceRounds = 5

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
	keys, err := c.inspectKeys(name)
	if err != nil {
		return nil, err
	}
	return c.readLock(ctx, "force-unlock", name, keys, func(ctx context.Context, n *engine.Node) (NodeInfo, error) {
		return forceNode(ctx, n, keys)
	})
}

// forceNode reads the lock on n, then removes it if it is still as read, for up to
// forceRounds rounds: a removal that finds the lock changed replies with the new reading,
// which the next round sends. Only one removal is ever out at a time.
func forceNode(ctx context.Context, n *engine.Node, keys keyspace.Keys) (NodeInfo, error) {
	reply, err := lockScript(ctx, n, keys, scripts.Inspect)
	for round := 0; ; round++ {
		if err != nil {
			return NodeInfo{}, err
		}
		info, derr := decodeLock(reply[:lockReplyLen], lockReadKeys(keys))
		if derr != nil || info.Kind == "" {
			return info, derr // not a lock, or nothing there to remove
		}
		if round > 0 && !forceChanged(reply) {
			return info, nil // removed: info is what was there
		}
		if round == forceRounds {
			return NodeInfo{}, ErrLockChanged
		}
		fence, value := lockVersion(reply)
		reply, err = lockScript(ctx, n, keys, scripts.ForceUnlock, keys.Channel, n.PublishCommand(), keys.GrantedPrefix(), fence, value)
		if err == nil && len(reply) != lockReplyLen+1 {
			err = fmt.Errorf("dlock: unexpected reply from the force-unlock script: %v", reply)
		}
	}
}

// lockVersion is what force_unlock.lua compares (ARGV[5], ARGV[6]) from a reading: the
// fencing counter, "" when there is none, and the lock key's value after "=", "" when it
// holds no string.
func lockVersion(reply []any) (fence, value string) {
	fence, _ = reply[6].(string)
	if v, ok := reply[4].(string); ok {
		value = "=" + v
	}
	return fence, value
}

// forceChanged reports whether force_unlock.lua found the lock changed since the reading
// it was sent with, and so removed nothing.
func forceChanged(reply []any) bool {
	changed, _ := reply[lockReplyLen].(int64)
	return changed == 1
}
