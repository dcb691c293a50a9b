package inspect

import (
	"context"
	"errors"
	"fmt"

	"github.com/seed51c676c8/dlock/internal/engine"
	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// ErrLockChanged is dlock.ErrLockChanged: the lock changed hands before each of a node's
// forceRounds removals.
var ErrLockChanged = errors.New("dlock: the lock changed hands on every try: it is in use, not stuck; nothing was removed")

// forceRounds bounds the removals ForceUnlock sends to one node. A stuck lock does not
// change, so the first lands; each further round follows an acquisition that came between
// a reading and its removal.
const forceRounds = 5

// ForceUnlock is dlock's Client.ForceUnlock on c: on every node, it removes the lock
// called name if it is still as read, and reports what it removed.
func ForceUnlock(ctx context.Context, c *engine.Client, name string) (*LockInfo, error) {
	return readLock(ctx, c, "force-unlock", name, forceNode)
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
