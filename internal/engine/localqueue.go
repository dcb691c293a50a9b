package engine

import "context"

// localQueue orders the goroutines of this process that wait for one lock key, first come
// first served. Only the head asks Redis; the others wait for their turn, so that any
// number of local waiters cost one request per release, not one each. Every field is
// guarded by Client.mu.
type localQueue struct {
	waiters []*localWaiter // by arrival; waiters[0] is the head
	held    *Hold          // this process's live outer hold of the key, nil when none
	// changed is closed (and cleared) when held is cleared or handed to the head; it is
	// made when the head first waits on it, so an uncontended Lock makes none.
	changed chan struct{}
	ask     *mutexAsk // Mutex: this process's standing request, nil when none (coordinator.go)
}

// behind is how many waiters are queued behind w (all of them if w is not queued).
func (q *localQueue) behind(w *localWaiter) int {
	if w != nil && len(q.waiters) > 0 && q.waiters[0] == w {
		return len(q.waiters) - 1
	}
	return len(q.waiters)
}

// signalLocked returns q.changed, making it if need be.
func (q *localQueue) signalLocked() <-chan struct{} {
	if q.changed == nil {
		q.changed = make(chan struct{})
	}
	return q.changed
}

// notifyLocked wakes whoever waits on q.changed.
func (q *localQueue) notifyLocked() {
	if q.changed != nil {
		close(q.changed)
		q.changed = nil
	}
}

// localWaiter is one Lock call in a local queue; it lives in the call's request.
type localWaiter struct {
	ctx    context.Context // the waiter's Lock ctx: a hold handed to it keeps its values
	cfg    LockConfig      // the options of the handle it locked: a hold handed to it has them
	turn   chan struct{}   // closed when the waiter becomes the head
	queue  *localQueue     // the queue it joined
	handed *Hold           // guarded by Client.mu: the hold handed to it, until taken
}

// closedChan is the turn of a waiter that is the head as soon as it joins.
var closedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

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
// lock's turns, with its token: the caller must then take the process out.
func (c *Client) leave(key string, w *localWaiter) (untaken *Hold, leaveTurns bool, ask any) {
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
		leaveTurns, ask, q.ask = true, q.ask.token, nil
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
