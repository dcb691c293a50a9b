package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// TestLateReplyEndsSilence: the reply of a silent node that comes after its poll gave up
// on it ends its silence; a late transport error does not.
func TestLateReplyEndsSilence(t *testing.T) {
	c := &Client{nodes: []*Node{{}, {}}, done: make(chan struct{})}
	replies := make(chan *batch.Call, 2)
	calls := []batch.Call{{Node: 0, Done: replies}, {Node: 1, Done: replies}}
	for _, n := range c.nodes {
		n.missed(time.Minute)
	}
	calls[1].Err = errors.New("read tcp: i/o timeout")
	replies <- &calls[1]
	replies <- &calls[0]
	lateReplies{nodes: c.nodes, closed: c.done, replies: replies, pending: 2, wait: time.Minute}.hear()
	if c.nodes[0].silent() {
		t.Error("node 0 replied late and is still silent")
	}
	if !c.nodes[1].silent() {
		t.Error("node 1 failed late and is no longer silent")
	}
}
