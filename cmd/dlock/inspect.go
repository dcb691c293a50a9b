package main

import (
	"context"
	_ "embed"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/keyspace"
)

var (
	//go:embed scripts/inspect.lua
	inspectSource string
	inspectScript = redis.NewScript(inspectSource)
)

// The kinds of dlock lock, as the inspect and force_unlock scripts tell them apart by the
// keys that exist (see scripts/inspect.lua). A key of any other type under the prefix is
// shown with its Redis type as its kind.
const (
	kindMutex     = "mutex"     // a string lock key holding the holder's token
	kindFair      = "fair"      // a mutex's string key plus a queue (FairMutex)
	kindRW        = "rw"        // a string write key and sorted sets of readers and waiting writers
	kindSemaphore = "semaphore" // a sorted set of holders at the lock key, a permits hash, a queue
)

// lockScriptKeys are the keys the inspect and force_unlock scripts read, in the order
// inspect.lua lists them: every key a lock of any kind may have.
func lockScriptKeys(keys keyspace.Keys) []string {
	return []string{
		keys.Lock, keys.Fence, keys.Aux("readers"), keys.Aux("writers"),
		keys.Aux("queue"), keys.Aux("queue:deadlines"), keys.Aux("permits"),
	}
}

// lockInfo is what status and list show of one lock on one node. Its JSON form is part of
// the command's contract ('dlock help status'): fields are added, never changed.
type lockInfo struct {
	Name    string `json:"name"`
	Key     string `json:"key"`
	Node    string `json:"node,omitempty"`   // quorum only
	Held    bool   `json:"held"`             // someone holds the lock (for a mutex: its key exists)
	Kind    string `json:"kind,omitempty"`   // mutex, fair, rw, semaphore, or the Redis type of a key dlock does not know
	Holder  string `json:"holder,omitempty"` // the holder's (rw: the writer's) token, for the kinds that have one
	Fence   uint64 `json:"fence"`            // the fencing counter: the latest fencing token
	TTLms   *int64 `json:"ttl_ms"`           // milliseconds left; -1 without expiry; null when free
	Waiters int64  `json:"waiters"`          // subscribed processes, or live queue entries (fair, semaphore)

	Mode           string `json:"mode,omitempty"`            // rw: write, read or free
	Readers        *int64 `json:"readers,omitempty"`         // rw: live readers
	WritersWaiting *int64 `json:"writers_waiting,omitempty"` // rw: live waiting writers
	Holders        *int64 `json:"holders,omitempty"`         // semaphore: live holders
	PermitsInUse   *int64 `json:"permits_in_use,omitempty"`  // semaphore: the permits they hold
	Queue          *int64 `json:"queue,omitempty"`           // live entries of a queue (fair, semaphore, or a free lock's)
}

// inspectLock reads one lock on one node, at one instant: its kind, holders, counter and
// queue; then its subscribed waiters.
func inspectLock(ctx context.Context, d *deployment, n node, name string, keys keyspace.Keys) (lockInfo, error) {
	info := lockInfo{Name: name, Key: keys.Lock}
	if d.quorum() {
		info.Node = n.name
	}
	reply, err := inspectScript.Run(ctx, n.rdb, lockScriptKeys(keys)).Slice()
	if err != nil {
		return info, err
	}
	if len(reply) != 9 {
		return info, fmt.Errorf("unexpected reply from the inspect script: %v", reply)
	}
	info.Kind, _ = reply[0].(string)
	pttl, _ := reply[1].(int64)
	info.Holder, _ = reply[2].(string)
	if fence, ok := reply[3].(string); ok {
		info.Fence, _ = strconv.ParseUint(fence, 10, 64)
	}
	readers, writers, queue, holders, permits := replyInt(reply[4]), replyInt(reply[5]), replyInt(reply[6]), replyInt(reply[7]), replyInt(reply[8])
	if pttl != -2 {
		info.Held = true
		info.TTLms = &pttl
	}
	switch {
	case info.Kind == kindSemaphore:
		queue = max(queue, 0) // no queue key: no one queues
		info.Queue = &queue
	case queue >= 0 && (info.Kind == kindFair || info.Kind == ""):
		info.Queue = &queue
	}
	switch info.Kind {
	case kindRW:
		info.Readers, info.WritersWaiting = &readers, &writers
		switch {
		case info.Holder != "":
			info.Mode = "write"
		case readers > 0:
			info.Mode = "read"
		default:
			info.Mode = "free"
		}
	case kindSemaphore:
		info.Holders, info.PermitsInUse = &holders, &permits
	}
	// A queue's waiters are its live entries; they listen on channels of their own (a
	// FairMutex's) or, on a quorum, do not queue (a Semaphore's): count those that do.
	if info.Queue != nil && !d.quorum() {
		info.Waiters = *info.Queue
		return info, nil
	}
	info.Waiters, err = waiters(ctx, d, n, keys)
	return info, err
}

// replyInt is an integer of a script's reply, 0 when it is not one.
func replyInt(v any) int64 {
	i, _ := v.(int64)
	return i
}

// detail is the DETAIL column: what matters for the lock's kind beyond HOLDER and TTL.
func (in lockInfo) detail() string {
	var parts []string
	switch in.Kind {
	case kindRW:
		parts = append(parts, in.Mode)
		if r := deref(in.Readers); r > 0 || in.Mode == "read" {
			parts = append(parts, plural(r, "reader"))
		}
		if w := deref(in.WritersWaiting); w > 0 {
			parts = append(parts, plural(w, "writer")+" waiting")
		}
	case kindSemaphore:
		s := "in use " + strconv.FormatInt(deref(in.PermitsInUse), 10)
		if h := deref(in.Holders); h > 0 {
			s += " by " + plural(h, "holder")
		}
		parts = append(parts, s)
	default:
		if in.Kind == "" && deref(in.Queue) > 0 {
			parts = append(parts, "free, "+plural(*in.Queue, "waiter")+" queued")
		}
	}
	return strings.Join(parts, ", ")
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// plural is "1 reader", "2 readers".
func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.FormatInt(n, 10) + " " + what + "s"
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
