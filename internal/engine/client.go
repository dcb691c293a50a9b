package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/renew"
)

// closeTimeout bounds the releases that Close sends for the leases it still holds.
const closeTimeout = 5 * time.Second

// Client is the engine of one public Client: its nodes, what this process holds and waits
// for, and the renewal scheduler.
type Client struct {
	nodes []*Node
	cfg   ClientConfig
	pub   Public
	err   error  // a construction error, returned by every operation
	id    string // this Client's id in Mutex turn lists: random, one per process and Client

	batchers []*batch.Batcher // one per node, in the order of nodes
	allNodes []int            // the index of every node, for sendEvery; read-only
	sched    *renew.Scheduler

	mu          sync.Mutex
	queues      map[string]*localQueue // guarded by mu: waiters and holds of this process, by lock key
	spareQueues []*localQueue          // guarded by mu: idle queues kept for reuse
	holds       map[*Hold]struct{}     // guarded by mu: outer holds not yet ended, released by Close
	closed      bool                   // guarded by mu
	done        chan struct{}          // closed by Close; ends every wait

	// inflight counts the Lock calls under way; Close waits for them (they end at once
	// when done is closed) before it releases what is held and stops the batchers, so that
	// an acquisition that lands during Close is seen and released. Add happens under mu
	// while closed is false, so never after Close began to Wait.
	inflight sync.WaitGroup

	stamps stampBook // the TimestampMutex deadlines this Client's holds own, by key

	turn  turn      // how long a release keeps the lock for the process whose turn it is
	hooks testHooks // set by tests only, before the Client is used
}

// testHooks let tests stop the engine at a point where a race can happen, to drive it on
// purpose. Nil hooks are skipped.
type testHooks struct {
	// renewCaptured runs in a renewal batch after the leases' lengths and numbers are
	// taken and before the calls are sent; the func it returns, if any, runs once the
	// batch's results are applied.
	renewCaptured func() (applied func())
}

// NewClient returns the engine of a Client of the deployments rdbs, each reached through
// the batcher at the same index (the transport, which the public package chooses).
func NewClient(rdbs []redis.UniversalClient, batchers []*batch.Batcher, cfg ClientConfig, pub Public) *Client {
	c := &Client{
		id:       newToken(),
		cfg:      cfg,
		pub:      pub,
		batchers: batchers,
		turn:     newTurn(turnLength),
		queues:   make(map[string]*localQueue),
		holds:    make(map[*Hold]struct{}),
		done:     make(chan struct{}),
	}
	for i, rdb := range rdbs {
		c.nodes = append(c.nodes, newNode(rdb, cfg.Logger, cfg.Observers))
		c.allNodes = append(c.allNodes, i)
	}
	c.sched = renew.New(func(due []*renew.Entry) { renewBatch(c, due) }, expire)
	return c
}

// Failed returns a Client whose every operation returns err.
func Failed(err error, cfg ClientConfig, pub Public) *Client {
	return &Client{cfg: cfg, pub: pub, err: err, done: make(chan struct{})}
}

// Prefix is the namespace of the Client's keys.
func (c *Client) Prefix() string { return c.cfg.Prefix }

// Nodes are the Client's deployments, in the order it was given them.
func (c *Client) Nodes() []*Node { return c.nodes }

// PublicError is the public error of s (Public.Error), for the operations that fan out
// outside the engine (internal/inspect).
func (c *Client) PublicError(s Shortfall) error { return c.pub.Error(s) }

// SetTurnLength sets how long a Mutex turn lasts, for tests; call it before c is used.
func (c *Client) SetTurnLength(d time.Duration) { c.turn = newTurn(d) }

// SetRenewCaptured sets the renewCaptured test hook; call it before c is used.
func (c *Client) SetRenewCaptured(f func() (applied func())) { c.hooks.renewCaptured = f }

// enter registers a Lock call under way; the caller calls c.inflight.Done when it returns.
func (c *Client) enter() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.inflight.Add(1)
	return nil
}

// nodeTimeout is how long one node may take to answer one call. On a quorum it is short
// (quorum.NodeTimeout), since a hung node must cost a fraction of the lease and the other
// nodes can decide without it; one deployment has no other node to turn to, so it gets
// longer (a third of the lease, at most a second), which a loaded server needs more than
// a quick verdict. Waits for replica acknowledgements (acks.go) come on top: two, since
// a call can queue on its lane behind a round trip whose WAIT is under way before its own
// round trip's WAIT.
func (c *Client) nodeTimeout(ttl time.Duration) time.Duration {
	acks := 2 * c.cfg.Acks.Timeout
	if len(c.nodes) > 1 {
		return quorum.NodeTimeout(ttl) + acks
	}
	return min(max(ttl/3, 5*time.Millisecond), time.Second) + acks
}

// Usable reports the error that stops every operation: a construction error or Close.
func (c *Client) Usable() error {
	if c.err != nil {
		return c.err
	}
	select {
	case <-c.done:
		return ErrClosed
	default:
		return nil
	}
}

// Close releases every lease the Client still holds (bounded by closeTimeout, after which
// their keys expire by themselves), ends every wait with ErrClosed and stops renewal. It
// does not close the Redis clients. Calling Close again returns nil.
func (c *Client) Close() error {
	if c.err != nil {
		return nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	c.mu.Unlock()
	c.inflight.Wait()
	err := c.releaseAll()
	c.sched.Stop()
	for _, n := range c.nodes {
		n.hub.Close()
	}
	for _, b := range c.batchers {
		b.Stop()
	}
	return err
}

// releaseAll releases every outer hold not yet ended, all at once, within closeTimeout.
func (c *Client) releaseAll() error {
	c.mu.Lock()
	holds := make([]*Hold, 0, len(c.holds))
	for h := range c.holds {
		holds = append(holds, h)
	}
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var errs []error
	var wg sync.WaitGroup
	var errMu sync.Mutex
	for _, h := range holds {
		wg.Go(func() {
			if err := h.release(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}

// The local state of this process, guarded by mu: what it holds and who waits for it, by
// lock key (localqueue.go).

// join appends w to the queue of key.
func (c *Client) join(key string, ctx context.Context, cfg LockConfig, w *localWaiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queueLocked(key)
	w.ctx, w.cfg, w.queue = ctx, cfg, q
	if len(q.waiters) == 0 {
		w.turn = closedChan
	} else {
		w.turn = make(chan struct{})
	}
	q.waiters = append(q.waiters, w)
}

// leave removes w and hands the turn to the next waiter if w was the head. It returns a
// hold handed to w that w did not take (it gave up meanwhile): the caller must end it. It
// reports whether w was the last waiter of a process that has a standing request in the
// lock's turns, with the request: the caller must then take the process out.
func (c *Client) leave(key string, w *localWaiter) (untaken *Hold, leaveTurns bool, ask *mutexAsk) {
	c.mu.Lock()
	defer c.mu.Unlock()
	q := w.queue
	untaken, w.handed = w.handed, nil
	for i, x := range q.waiters {
		if x != w {
			continue
		}
		q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
		if i == 0 && len(q.waiters) > 0 {
			close(q.waiters[0].turn)
		}
		break
	}
	if len(q.waiters) == 0 && q.ask != nil {
		leaveTurns, ask, q.ask = true, q.ask, nil
	}
	c.dropIfIdleLocked(key, q)
	return untaken, leaveTurns, ask
}

// adopt records a new outer hold. It fails with ErrClosed if Close has begun, since Close
// would not release a hold it did not see.
func (c *Client) adopt(h *Hold) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.holds[h] = struct{}{}
	if h.t.coord != nil {
		c.queueLocked(h.t.keys.Lock).held = h
	}
	return nil
}

// forget removes an ended hold and wakes the local head, which may now ask Redis.
func (c *Client) forget(h *Hold) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.holds, h)
	q := c.queues[h.t.keys.Lock]
	if q == nil || q.held != h {
		return
	}
	q.held = nil
	q.notifyLocked()
	c.dropIfIdleLocked(h.t.keys.Lock, q)
}

// maxSpareQueues bounds the idle queues a Client keeps for reuse.
const maxSpareQueues = 64

func (c *Client) queueLocked(key string) *localQueue {
	q := c.queues[key]
	if q == nil {
		if n := len(c.spareQueues); n > 0 {
			q, c.spareQueues = c.spareQueues[n-1], c.spareQueues[:n-1]
		} else {
			q = &localQueue{}
		}
		c.queues[key] = q
	}
	return q
}

func (c *Client) dropIfIdleLocked(key string, q *localQueue) {
	if len(q.waiters) == 0 && q.held == nil && c.queues[key] == q {
		delete(c.queues, key)
		if q.changed == nil && q.ask == nil && len(c.spareQueues) < maxSpareQueues {
			q.waiters = q.waiters[:0]
			c.spareQueues = append(c.spareQueues, q)
		}
	}
}

// takeHandoff returns the hold handed to w, if any; the caller now owns it.
func (c *Client) takeHandoff(w *localWaiter) *Hold {
	if w == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := w.handed
	w.handed = nil
	return h
}
