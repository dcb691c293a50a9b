package batch

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// asyncAutoPipeliner is what *redis.Client, *redis.ClusterClient and *redis.Ring have in
// common: the deferred face of go-redis' auto-pipeline.
type asyncAutoPipeliner interface {
	AsyncAutoPipeline() (*redis.AutoPipeliner, error)
}

// auto is the transport over go-redis' AutoPipeliner (its deferred face): every call is
// submitted at once, from the sender's goroutine, to the client's ordered command stream,
// which go-redis writes in batches while earlier batches are in flight. Its hooks and
// MaxRetries apply as to any command of the client.
//
// The AutoPipeliner is the client's own, cached and shared with the rest of the program
// (go-redis keeps one per client), and configured by the client's
// Options.AutoPipelineOptions; it is closed with the client, never by Stop.
//
// A submitted call cannot be taken back: its deadline counts only while it waits for room.
// Collectors, one per lane of keys as in lanes, wait for the replies in submit order and
// answer the calls, so that a node that hangs (one node of a Cluster) holds up only the
// replies of its own lanes.
type auto struct {
	ap    *redis.AutoPipeliner
	rdb   redis.UniversalClient // for SendAll and the NOSCRIPT fallback
	lanes *lanes                // SendAll's pipelines, and the key-to-lane hash

	collectors []chan *Call // calls submitted, in submit order per lane
	room       []chan struct{}

	stopOnce sync.Once
	stopped  chan struct{}
	wg       sync.WaitGroup // the collectors

	// sending is read-locked by send while it may still submit a call, and locked by stop
	// before it closes the collectors' queues.
	sending sync.RWMutex
}

// newAuto returns the transport, or nil if rdb has no AutoPipeliner or its configuration
// gives up the order of commands (Unordered), which an Unlock behind its Lock needs.
func newAuto(rdb redis.UniversalClient, collectors int) *auto {
	p, ok := rdb.(asyncAutoPipeliner)
	if !ok || collectors < 1 {
		return nil
	}
	ap, err := p.AsyncAutoPipeline()
	if err != nil || ap.Config().Unordered {
		return nil
	}
	a := &auto{
		ap:         ap,
		rdb:        rdb,
		lanes:      newLanes(rdb, 0),
		collectors: make([]chan *Call, collectors),
		room:       make([]chan struct{}, collectors),
		stopped:    make(chan struct{}),
	}
	for i := range a.collectors {
		a.collectors[i] = make(chan *Call, 4*maxBatch)
		a.room[i] = make(chan struct{}, 4*maxBatch)
		a.wg.Add(1)
		go a.collect(a.collectors[i], a.room[i])
	}
	return a
}

// lane returns the index of c's lane: by the hash tag of its first key, as in lanes.
func (a *auto) lane(c *Call) int {
	if len(c.Keys) == 0 || len(a.collectors) == 1 {
		return 0
	}
	return int(tagHash(c.Keys[0]) % uint32(len(a.collectors)))
}

func (a *auto) send(c *Call, wait bool) bool {
	a.sending.RLock()
	defer a.sending.RUnlock()
	return a.sendLocked(c, wait)
}

// sendLocked is send under a.sending's read lock, which it does not take again: a read
// lock taken twice deadlocks once Stop waits for the write lock between the two.
func (a *auto) sendLocked(c *Call, wait bool) bool {
	if a.isStopped() {
		return false
	}
	i := a.lane(c)
	select {
	case a.room[i] <- struct{}{}:
	default:
		if !wait {
			return false
		}
		if ok, stopped := a.waitRoom(a.room[i], c.Deadline); !ok {
			if stopped {
				return false
			}
			c.Err = errExpired
			c.Done <- c
			return true
		}
	}
	if !c.Deadline.IsZero() && !time.Now().Before(c.Deadline) {
		<-a.room[i]
		c.Err = errExpired
		c.Done <- c
		return true
	}
	if c.Before != nil {
		// Submitted first to the one AutoPipeliner, so written ahead of c; and only once c
		// has its room, so that a send refused for want of room sends nothing, and the
		// Send that follows it does not send the Before a second time.
		a.sendLocked(c.Before, false)
	}
	c.cmd = a.lanes.seen.cmd(context.Background(), c, a.ap)
	a.collectors[i] <- c // never blocks: room was reserved
	return true
}

// waitRoom waits for room in a lane until deadline (zero: none) or Stop.
func (a *auto) waitRoom(room chan struct{}, deadline time.Time) (ok, stopped bool) {
	var expired <-chan time.Time
	if !deadline.IsZero() {
		timer := time.NewTimer(time.Until(deadline))
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case room <- struct{}{}:
		return true, false
	case <-a.stopped:
		return false, true
	case <-expired:
		return false, false
	}
}

func (a *auto) isStopped() bool {
	select {
	case <-a.stopped:
		return true
	default:
		return false
	}
}

// collect answers the calls of one lane in the order they were submitted.
func (a *auto) collect(calls <-chan *Call, room <-chan struct{}) {
	defer a.wg.Done()
	for c := range calls {
		a.answer(c)
		<-room
	}
}

// answer waits for c's reply and sends c on its Done. A call that finds the server's
// script cache empty (restart, SCRIPT FLUSH) was not run: it is sent again as EVAL, with
// the script's source, which also loads the script for the calls after it.
func (a *auto) answer(c *Call) {
	cmd := c.cmd
	c.cmd = nil
	c.Val, c.Err = cmd.Int64() // blocks until the reply is in
	if c.Err != nil && redis.HasErrorPrefix(c.Err, "NOSCRIPT") {
		c.Val, c.Err = c.Script.Eval(context.Background(), a.ap, c.Keys, c.Args...).Int64()
	}
	reloadIf(a.rdb, c.Err)
	c.Done <- c
}

func (a *auto) sendAll(calls []*Call) { a.lanes.sendAll(calls) }

// stop refuses new calls, waits for the replies of the calls submitted (go-redis' read
// timeout bounds that wait) and for the pipelines of SendAll.
func (a *auto) stop() {
	a.stopOnce.Do(func() {
		close(a.stopped)
		// A send that saw the transport running may be about to submit: wait for it
		// (with stopped closed it does not block) before closing the queues.
		a.sending.Lock()
		for _, calls := range a.collectors {
			close(calls)
		}
		a.sending.Unlock()
	})
	a.wg.Wait()
	a.lanes.stop()
}
