package main

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/keyspace"
)

var (
	//go:embed scripts/inspect.lua
	inspectSource string
	inspectScript = redis.NewScript(inspectSource)
)

// lockKind is a kind of dlock lock as Redis stores it. status, list and unlock recognise a
// lock by the Redis type of its key; a key of any other type is shown with that type.
type lockKind struct {
	name      string // shown as KIND
	redisType string // the Redis type of the lock key
	// holder returns the holder's identity from the value the inspect script read.
	holder func(value string) string
	// forceUnlockable: 'dlock unlock --force' knows how to remove it.
	forceUnlockable bool
}

// lockKinds are the kinds dlock describes. A FairMutex's lock key is a Mutex's (a string),
// so it shows as a mutex. RWMutex (a string write key, readers in the sorted set
// Aux("readers")) and Semaphore (holders in a sorted set under the lock key) go here next:
// their Redis type, how to read their holders (extend the inspect script to return what
// they need), and whether force_unlock.lua can remove them.
var lockKinds = []lockKind{
	{name: "mutex", redisType: "string", holder: func(v string) string { return v }, forceUnlockable: true},
}

// kindOf returns the kind whose lock key has the Redis type t.
func kindOf(t string) (lockKind, bool) {
	for _, k := range lockKinds {
		if k.redisType == t {
			return k, true
		}
	}
	return lockKind{}, false
}

// lockInfo is what status and list show of one lock on one node. Its JSON form is part of
// the command's contract ('dlock help status').
type lockInfo struct {
	Name    string `json:"name"`
	Key     string `json:"key"`
	Node    string `json:"node,omitempty"`   // quorum only
	Held    bool   `json:"held"`             // the lock key exists
	Kind    string `json:"kind,omitempty"`   // "mutex", or the Redis type of a key dlock does not know
	Holder  string `json:"holder,omitempty"` // the holder's token, for the kinds that have one
	Fence   uint64 `json:"fence"`            // the fencing counter: the latest fencing token
	TTLms   *int64 `json:"ttl_ms"`           // milliseconds left; -1 without expiry; null when free
	Waiters int64  `json:"waiters"`          // processes subscribed to the release channel
}

// inspectLock reads one lock on one node: the key, its counter, its waiters.
func inspectLock(ctx context.Context, d *deployment, n node, name string, keys keyspace.Keys) (lockInfo, error) {
	info := lockInfo{Name: name, Key: keys.Lock}
	if d.quorum() {
		info.Node = n.name
	}
	reply, err := inspectScript.Run(ctx, n.rdb, []string{keys.Lock, keys.Fence}).Slice()
	if err != nil {
		return info, err
	}
	if len(reply) != 4 {
		return info, fmt.Errorf("unexpected reply from the inspect script: %v", reply)
	}
	typ, _ := reply[0].(string)
	value, _ := reply[1].(string)
	pttl, _ := reply[2].(int64)
	if fence, ok := reply[3].(string); ok {
		info.Fence, _ = strconv.ParseUint(fence, 10, 64)
	}
	if typ != "none" {
		info.Held = true
		info.TTLms = &pttl
		info.Kind = typ
		if k, ok := kindOf(typ); ok {
			info.Kind = k.name
			info.Holder = k.holder(value)
		}
	}
	info.Waiters, err = waiters(ctx, d, n, keys)
	return info, err
}

// waiters counts the client connections subscribed to the lock's release channel: PUBSUB
// NUMSUB, or PUBSUB SHARDNUMSUB on the Cluster master that owns the lock's slot. dlock
// shares one subscription per process, so this counts processes, not goroutines.
func waiters(ctx context.Context, d *deployment, n node, keys keyspace.Keys) (int64, error) {
	if cc, ok := n.rdb.(*redis.ClusterClient); ok {
		master, err := cc.MasterForKey(ctx, keys.Lock)
		if err != nil {
			return 0, err
		}
		m, err := master.PubSubShardNumSub(ctx, keys.Channel).Result()
		return m[keys.Channel], err
	}
	m, err := n.rdb.PubSubNumSub(ctx, keys.Channel).Result()
	return m[keys.Channel], err
}
