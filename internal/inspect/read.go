package inspect

import (
	"context"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/engine"
	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// inspectLimit bounds the entries read of each list and set of a lock (holders, readers,
// queues), so that a huge queue cannot make one reply huge.
const inspectLimit = 1000

var inspectLimitArg = strconv.Itoa(inspectLimit)

// lockReadKeys are the keys of lock_read.lua, in its order.
func lockReadKeys(k keyspace.Keys) []string {
	return []string{k.Lock, k.Fence, k.Turns, k.Queue(), k.QueueDeadlines(), k.Readers(), k.Writers(), k.Permits()}
}

// runLockScript runs inspect.lua on one node and decodes the reply.
func runLockScript(ctx context.Context, n *engine.Node, keys keyspace.Keys) (NodeInfo, error) {
	reply, err := lockScript(ctx, n, keys, scripts.Inspect)
	if err != nil {
		return NodeInfo{}, err
	}
	return decodeLock(reply, lockReadKeys(keys))
}

// lockScript runs inspect.lua or force_unlock.lua (whose reply begins as inspect.lua's)
// on one node, and checks that the reply holds a reading. args follow the limit.
func lockScript(ctx context.Context, n *engine.Node, keys keyspace.Keys, script *redis.Script, args ...any) ([]any, error) {
	reply, err := script.Run(ctx, n.RDB, lockReadKeys(keys), append([]any{inspectLimitArg}, args...)...).Slice()
	if err == nil && len(reply) < lockReplyLen {
		err = fmt.Errorf("dlock: unexpected reply from the inspect script: %v", reply)
	}
	return reply, err
}

// listeners counts the connections subscribed to the lock's release channel: PUBSUB
// NUMSUB, or PUBSUB SHARDNUMSUB on the Cluster master that owns the lock's slot.
func listeners(ctx context.Context, n *engine.Node, keys keyspace.Keys) (int64, error) {
	if cc, ok := n.RDB.(*redis.ClusterClient); ok {
		master, err := cc.MasterForKey(ctx, keys.Lock)
		if err != nil {
			return 0, err
		}
		m, err := master.PubSubShardNumSub(ctx, keys.Channel).Result()
		return m[keys.Channel], err
	}
	m, err := n.RDB.PubSubNumSub(ctx, keys.Channel).Result()
	return m[keys.Channel], err
}
