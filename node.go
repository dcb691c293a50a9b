package dlock

import (
	"errors"
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

	// silentUntil (monoNow nanoseconds; 0: not silent) is set when a poll waited the
	// whole per-node timeout for the node in vain, pushed on while the polls that did not
	// wait for it end without its answer, and cleared by any reply from it, late ones too
	// (see votes.hearLate). While it is silent, an attempt does not wait for it once the
	// other nodes have answered and show the lock held or split, nor does a waiter for
	// its subscription: a hung or blackholed node would otherwise cost every contended
	// attempt the per-node timeout, during which the contenders keep their shares of the
	// other nodes and split again. It lapses after silentPolls timeouts without a poll,
	// so that a node is waited for again.
	silentUntil atomic.Int64
}

// silentPolls is how many per-node timeouts a node stays silent after it last missed one.
const silentPolls = 5

func (n *node) publishCommand() string {
	if n.cluster {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// silent reports whether the node missed a recent poll and has not replied since.
func (n *node) silent() bool {
	until := n.silentUntil.Load()
	return until != 0 && monoNow() < until
}

// missed records that the node did not answer a poll that waited timeout for it, or
// that ended without the answer of a node already silent.
func (n *node) missed(timeout time.Duration) {
	n.silentUntil.Store(monoNow() + int64(silentPolls*timeout))
}

// replied records a reply from the node.
func (n *node) replied() {
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
	var rerr redis.Error
	return err == nil || errors.As(err, &rerr)
}
