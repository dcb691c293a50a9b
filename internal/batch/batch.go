// Package batch shares round trips between concurrent callers: every script call that
// goroutines send to one Redis deployment while a round trip is in flight goes out in the
// next pipeline. It also lets a caller stop waiting when its context ends, which go-redis
// itself does not do for a server that accepted the connection and then stopped answering.
package batch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrStopped is the error of a call sent after Stop.
var ErrStopped = errors.New("dlock: client closed")

// errExpired is the error of a call whose deadline passed before it was sent: it was never
// sent, so it cannot have changed anything in Redis.
var errExpired = errors.New("deadline passed before the call was sent")

// maxBatch bounds one pipeline, so that a burst does not become one huge round trip.
const maxBatch = 256

// Call is one script invocation. The caller fills in Script, Keys, Args, Node, Deadline and
// Done; the batcher fills in Val and Err and then sends the Call on Done exactly once.
type Call struct {
	Script   *redis.Script
	Keys     []string
	Args     []any
	Node     int       // for the caller: which node the call went to
	Deadline time.Time // zero for none; a call still queued at its deadline is not sent

	Val int64 // the script's integer reply
	Err error

	Done chan<- *Call // must have room for the reply: the batcher never blocks on it
}

// Batcher sends the calls of one deployment. Its methods are safe for concurrent use.
type Batcher struct {
	rdb   redis.UniversalClient
	calls chan *Call

	stopOnce sync.Once
	stopped  chan struct{}
	wg       sync.WaitGroup
}

// New starts a batcher with the given number of pipelines in flight at once.
func New(rdb redis.UniversalClient, inFlight int) *Batcher {
	b := &Batcher{
		rdb:     rdb,
		calls:   make(chan *Call, 4*maxBatch),
		stopped: make(chan struct{}),
	}
	b.wg.Add(inFlight)
	for range inFlight {
		go b.work()
	}
	return b
}

// Send queues c. It blocks only while the queue is full, and returns false (having sent
// nothing) if the batcher is stopped.
func (b *Batcher) Send(c *Call) bool {
	select {
	case <-b.stopped:
		return false
	default:
	}
	select {
	case b.calls <- c:
		return true
	case <-b.stopped:
		return false
	}
}

// Stop ends the workers after the round trips in flight and fails the calls still queued
// with ErrStopped. It waits for the workers.
func (b *Batcher) Stop() {
	b.stopOnce.Do(func() { close(b.stopped) })
	b.wg.Wait()
	for {
		select {
		case c := <-b.calls:
			c.Err = ErrStopped
			c.Done <- c
		default:
			return
		}
	}
}

func (b *Batcher) work() {
	defer b.wg.Done()
	batch := make([]*Call, 0, maxBatch)
	for {
		select {
		case c := <-b.calls:
			batch = append(batch[:0], c)
		case <-b.stopped:
			return
		}
	fill:
		for len(batch) < maxBatch {
			select {
			case c := <-b.calls:
				batch = append(batch, c)
			default:
				break fill
			}
		}
		b.exec(batch)
		clear(batch)
	}
}

// exec runs the batch: one call on its own (EVALSHA with EVAL fallback), several in one
// pipeline. Calls whose deadline has passed are answered without being sent.
func (b *Batcher) exec(batch []*Call) {
	now := time.Now()
	live := batch[:0]
	for _, c := range batch {
		if !c.Deadline.IsZero() && !now.Before(c.Deadline) {
			c.Err = errExpired
			c.Done <- c
			continue
		}
		live = append(live, c)
	}
	ctx := context.Background()
	switch len(live) {
	case 0:
		return
	case 1:
		c := live[0]
		c.Val, c.Err = c.Script.Run(ctx, b.rdb, c.Keys, c.Args...).Int64()
		c.Done <- c
		return
	}
	Pipeline(ctx, b.rdb, live)
}

// Pipeline runs calls in one pipeline on rdb and sends each on its Done channel. A call
// that finds the server's script cache empty (restart, SCRIPT FLUSH) is run again on its
// own, which loads the script.
func Pipeline(ctx context.Context, rdb redis.UniversalClient, calls []*Call) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = c.Script.EvalSha(ctx, pipe, c.Keys, c.Args...)
	}
	_, _ = pipe.Exec(ctx)
	for i, c := range calls {
		c.Val, c.Err = cmds[i].Int64()
		if c.Err != nil && redis.HasErrorPrefix(c.Err, "NOSCRIPT") {
			c.Val, c.Err = c.Script.Run(ctx, rdb, c.Keys, c.Args...).Int64()
		}
		c.Done <- c
	}
}

// IsExpired reports whether err means the call was dropped before it was sent.
func IsExpired(err error) bool { return errors.Is(err, errExpired) }
