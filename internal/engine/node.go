package engine

import (
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/notify"
)

// Node is one Redis deployment of a Client.
type Node struct {
	RDB     redis.UniversalClient
	Name    string // its address, for errors (NodeName)
	hub     *notify.Hub
	cluster bool // Redis Cluster: sharded pub/sub
	db      int  // for keyspace notification channels

	// silentUntil (monoNow nanoseconds; 0: not silent) is set when a poll, or a renewal
	// batch (renewals.heard), waited the whole per-node timeout for the node in vain,
	// pushed on while the polls that did not
	// wait for it end without its answer, and cleared by any reply from it, late ones too
	// (see hearLate). While it is silent, an attempt does not wait for it once the
	// other nodes have answered and show the lock held or split, nor does a waiter for
	// its subscription: a hung or blackholed node would otherwise cost every contended
	// attempt the per-node timeout, during which the contenders keep their shares of the
	// other nodes and split again. It lapses after silentPolls timeouts without a poll,
	// so that a node is waited for again.
	silentUntil atomic.Int64

	// silenced tells the Client's observers that the node became silent (NodeSilent); nil:
	// no one is told.
	silenced func(addr string)
}

// silentPolls is how many per-node timeouts a node stays silent after it last missed one.
const silentPolls = 5

func newNode(rdb redis.UniversalClient, logger *slog.Logger, silenced func(addr string)) *Node {
	n := &Node{RDB: rdb, Name: NodeName(rdb), hub: notify.NewHub(rdb, logger), silenced: silenced}
	switch r := rdb.(type) {
	case *redis.ClusterClient:
		n.cluster = true
	case *redis.Client:
		n.db = r.Options().DB
	}
	return n
}

// NodeName names a deployment in errors: its address, never its credentials.
func NodeName(rdb redis.UniversalClient) string {
	switch r := rdb.(type) {
	case *redis.Client:
		return r.Options().Addr
	case *redis.ClusterClient:
		return fmt.Sprintf("cluster%v", r.Options().Addrs)
	case *redis.Ring:
		return fmt.Sprintf("ring%v", r.Options().Addrs)
	}
	return fmt.Sprintf("%T", rdb)
}

// PublishCommand is how a script wakes waiters on n: SPUBLISH on a Cluster (sharded
// pub/sub, so that the message stays on the shard that owns the lock), else PUBLISH.
func (n *Node) PublishCommand() string {
	if n.cluster {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// keyspaceChannel is where the server publishes the events of key, if it is configured to.
func (n *Node) keyspaceChannel(key string) notify.Channel {
	return notify.Channel{Name: fmt.Sprintf("__keyspace@%d__:%s", n.db, key)}
}

// releaseChannel is the channel, on n, where the releases of a lock are published.
func (n *Node) releaseChannel(name string) notify.Channel {
	return notify.Channel{Name: name, Sharded: n.cluster}
}

// silent reports whether the node missed a recent poll and has not replied since.
func (n *Node) silent() bool {
	until := n.silentUntil.Load()
	return until != 0 && monoNow() < until
}

// missed records that the node did not answer a poll that waited timeout for it, or
// that ended without the answer of a node already silent.
func (n *Node) missed(timeout time.Duration) {
	now := monoNow()
	if was := n.silentUntil.Swap(now + int64(silentPolls*timeout)); was == 0 || now >= was {
		if n.silenced != nil { // once per silence: only the call that began it saw it not silent
			n.silenced(n.Name)
		}
	}
}

// replied records a reply from the node.
func (n *Node) replied() {
	if n.silentUntil.Load() != 0 {
		n.silentUntil.Store(0)
	}
}

// epoch makes monoNow monotonic: a wall clock stepped back must not prolong a silence.
var epoch = time.Now()

func monoNow() int64 { return int64(time.Since(epoch)) }

// isReply reports whether a call's result came from the server: a reply, or an error
// reply; not a transport failure, a deadline or a stopped batcher.
func isReply(err error) bool {
	if err == nil {
		return true // before the target below, which escapes: no allocation per reply
	}
	var rerr redis.Error
	return errors.As(err, &rerr)
}
