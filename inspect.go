package dlock

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/engine"
	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// ErrNotLock is what Inspect and ForceUnlock report for a lock whose keys hold data no
// dlock lock writes (another program's keys under the same names): they read or remove
// nothing there.
var ErrNotLock = errors.New("dlock: the key holds something that is not a dlock lock")

// inspectLimit bounds the entries read of each list and set of a lock (holders, readers,
// queues), so that a huge queue cannot make one reply huge.
const inspectLimit = 1000

var inspectLimitArg = strconv.Itoa(inspectLimit)

// Inspect reads the lock called name on every node, each at one instant, and writes
// nothing: who holds it, with what time left, its fencing counter, who waits. It does not
// need to know the lock's kind. ctx bounds the whole call.
//
// When a node cannot be read, Inspect returns what the others answered with a
// *QuorumError that names each failing node (NodeInfo.Err says it too); a node whose keys
// hold something no lock writes fails with ErrNotLock.
func (c *Client) Inspect(ctx context.Context, name string) (*LockInfo, error) {
	keys, err := c.inspectKeys(name)
	if err != nil {
		return nil, err
	}
	return c.readLock(ctx, "inspect", name, keys, func(ctx context.Context, n *engine.Node) (NodeInfo, error) {
		info, err := runLockScript(ctx, n, keys, scripts.Inspect)
		if err != nil {
			return info, err
		}
		info.Listeners, err = listeners(ctx, n, keys)
		return info, err
	})
}

// inspectKeys checks the Client and derives the keys of name.
func (c *Client) inspectKeys(name string) (keyspace.Keys, error) {
	if err := c.e.Usable(); err != nil {
		return keyspace.Keys{}, err
	}
	return keyspace.For(c.e.Prefix(), name)
}

// readLock runs read on every node at once and summarises what they answered.
func (c *Client) readLock(ctx context.Context, op, name string, keys keyspace.Keys,
	read func(context.Context, *engine.Node) (NodeInfo, error)) (*LockInfo, error) {
	infos := make([]NodeInfo, len(c.e.Nodes()))
	var wg sync.WaitGroup
	for i, n := range c.e.Nodes() {
		wg.Go(func() {
			info, err := read(ctx, n)
			if err != nil {
				info = NodeInfo{Err: err}
			}
			info.Addr = n.Name
			infos[i] = info
		})
	}
	wg.Wait()
	in := summarise(name, keys.Lock, infos)
	qe := &QuorumError{Op: op, Name: name, Needed: len(infos), Total: len(infos)}
	for _, info := range infos {
		if info.Err == nil {
			qe.Agreed++
			continue
		}
		qe.Nodes = append(qe.Nodes, &NodeError{Addr: info.Addr, Err: info.Err})
	}
	if len(qe.Nodes) > 0 {
		return in, qe
	}
	return in, nil
}

// lockReadKeys are the keys of lock_read.lua, in its order.
func lockReadKeys(k keyspace.Keys) []string {
	return []string{k.Lock, k.Fence, k.Turns, k.Queue(), k.QueueDeadlines(), k.Readers(), k.Writers(), k.Permits()}
}

// runLockScript runs inspect.lua on one node and decodes the reply.
func runLockScript(ctx context.Context, n *engine.Node, keys keyspace.Keys, script *redis.Script) (NodeInfo, error) {
	reply, err := lockScript(ctx, n, keys, script)
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

// lockReplyLen is the length of inspect.lua's reply.
const lockReplyLen = 14

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

// summarise makes the top-level fields of a LockInfo from its nodes' (see LockInfo).
func summarise(name, key string, nodes []NodeInfo) *LockInfo {
	in := &LockInfo{Name: name, Key: key, Nodes: nodes}
	type seen struct {
		h     Holder
		count int
	}
	var holders []*seen
	byToken := map[string]*seen{}
	for _, n := range nodes {
		if in.Kind == "" {
			in.Kind = n.Kind
		}
		in.Fence = max(in.Fence, n.Fence)
		for _, w := range n.Waiters {
			if !slices.Contains(in.Waiters, w) {
				in.Waiters = append(in.Waiters, w)
			}
		}
		for _, h := range n.Holders {
			s := byToken[h.Token]
			if s == nil {
				s = &seen{h: h}
				byToken[h.Token] = s
				holders = append(holders, s)
			} else if h.TTL >= 0 && (s.h.TTL < 0 || h.TTL < s.h.TTL) {
				s.h.TTL = h.TTL
			}
			s.count++
		}
	}
	for _, s := range holders {
		if s.count >= quorum.Majority(len(nodes)) {
			in.Holders = append(in.Holders, s.h)
		}
	}
	return in
}

// decodeLock decodes lock_read.lua's reply (documented in inspect.lua); keys name the
// keys it read, for the error about a key of the wrong type.
func decodeLock(reply []any, keys []string) (NodeInfo, error) {
	if len(reply) != lockReplyLen {
		return NodeInfo{}, fmt.Errorf("dlock: unexpected reply from the inspect script: %v", reply)
	}
	var info NodeInfo
	now, _ := reply[0].(int64)
	info.Kind, _ = reply[1].(string)
	if bad, _ := reply[2].(int64); bad > 0 && int(bad) <= len(keys) {
		return NodeInfo{}, fmt.Errorf("%w: %s is a Redis %v", ErrNotLock, keys[bad-1], reply[3])
	}
	if value, ok := reply[4].(string); ok {
		pttl, _ := reply[5].(int64)
		info.Holders = append(info.Holders, Holder{Token: value, Permits: 1, TTL: leftOf(pttl)})
	}
	if fence, ok := reply[6].(string); ok {
		info.Fence, _ = strconv.ParseUint(fence, 10, 64)
	}
	permits := bulkStrings(reply[8])
	for i, m := range members(reply[7], now) {
		m.Permits, _ = strconv.ParseInt(at(permits, i), 10, 64)
		info.Holders = append(info.Holders, m)
	}
	for _, m := range members(reply[9], now) {
		m.Reader = true
		info.Holders = append(info.Holders, m)
	}
	for _, m := range members(reply[10], now) {
		info.Waiters = append(info.Waiters, m.Token)
	}
	deadlines := bulkStrings(reply[12])
	for i, w := range bulkStrings(reply[11]) {
		if d, _ := strconv.ParseInt(at(deadlines, i), 10, 64); d > now {
			info.Waiters = append(info.Waiters, w)
		}
	}
	info.Waiters = append(info.Waiters, bulkStrings(reply[13])...)
	return info, nil
}

// leftOf is a PTTL as a TTL: -1 (no expiry) stays -1.
func leftOf(pttl int64) time.Duration {
	if pttl < 0 {
		return -1
	}
	return time.Duration(pttl) * time.Millisecond
}

// members decodes a flat member, score list (ZRANGE WITHSCORES) of lease ends as holders
// with their time left at now.
func members(v any, now int64) []Holder {
	flat := bulkStrings(v)
	var out []Holder
	for i := 0; i+1 < len(flat); i += 2 {
		end, _ := strconv.ParseFloat(flat[i+1], 64)
		out = append(out, Holder{Token: flat[i], Permits: 1, TTL: leftOf(max(int64(end)-now, 0))})
	}
	return out
}

// bulkStrings decodes an array of bulk strings; a nil element is "".
func bulkStrings(v any) []string {
	arr, _ := v.([]any)
	out := make([]string, len(arr))
	for i, e := range arr {
		out[i], _ = e.(string)
	}
	return out
}

func at(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return ""
}
