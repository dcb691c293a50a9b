package dlock

import (
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/notify"
)

// node is one Redis deployment.
type node struct {
	rdb     redis.UniversalClient
	name    string // its address, for errors
	hub     *notify.Hub
	cluster bool // Redis Cluster: sharded pub/sub
	db      int  // for keyspace notification channels

	// silentUntil (Unix nanoseconds; 0: not silent) is set when the node let a call of
	// a poll go unanswered for the whole per-node timeout, and cleared when it answers.
	// While it is silent, a poll whose other answers already settle the attempt as held
	// or split does not wait for it, nor does a waiter for its subscription: a hung or
	// blackholed node would otherwise cost every contended attempt the per-node timeout,
	// during which the contenders keep their shares of the other nodes and split again.
	// The flag lapses after silentPolls timeouts, so that a node that came back is heard.
	silentUntil atomic.Int64
}

// silentPolls is how many per-node timeouts a node that missed one stays silent.
const silentPolls = 5

func (n *node) publishCommand() string {
	if n.cluster {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// silent reports whether the node missed a recent poll's timeout and has not answered since.
func (n *node) silent(now time.Time) bool {
	until := n.silentUntil.Load()
	return until != 0 && now.UnixNano() < until
}

// heard records whether the node answered a poll that waited timeout for it.
func (n *node) heard(answered bool, now time.Time, timeout time.Duration) {
	switch {
	case answered:
		if n.silentUntil.Load() != 0 {
			n.silentUntil.Store(0)
		}
	default:
		n.silentUntil.Store(now.Add(silentPolls * timeout).UnixNano())
	}
}
