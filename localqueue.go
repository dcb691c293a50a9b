package dlock

// localQueue orders the goroutines of this process that wait for one lock key, first come
// first served. Only the head asks Redis; the others wait for their turn, so that any
// number of local waiters cost one request per release, not one each. Every field is
// guarded by Client.mu.
type localQueue struct {
	waiters []*localWaiter // by arrival; waiters[0] is the head
	held    *hold          // this process's live outer hold of the key, nil when none
	changed chan struct{}  // closed (and replaced) when held is cleared
}

type localWaiter struct {
	turn chan struct{} // closed when the waiter becomes the head
}

// join appends a waiter to the queue of key.
func (c *Client) join(key string) (*localQueue, *localWaiter) {
	w := &localWaiter{turn: make(chan struct{})}
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queueLocked(key)
	q.waiters = append(q.waiters, w)
	if len(q.waiters) == 1 {
		close(w.turn)
	}
	return q, w
}

// leave removes w and hands the turn to the next waiter if w was the head.
func (c *Client) leave(key string, q *localQueue, w *localWaiter) {
	c.mu.Lock()
	defer c.mu.Unlock()
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
	c.dropIfIdleLocked(key, q)
}

// heldHere returns this process's live hold of t and a channel closed when it ends. Only
// locally queued kinds (Mutex, RWMutex writers) record their holds: for the others it
// reports none.
func (t *target) heldHere() (*hold, <-chan struct{}) {
	if !t.scheme.localQueue() {
		return nil, nil
	}
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.queues[t.keys.Lock]; q != nil && q.held != nil {
		return q.held, q.changed
	}
	return nil, nil
}

// adopt records a new outer hold. It fails with ErrClosed if Close has begun, since Close
// would not release a hold it did not see.
func (c *Client) adopt(h *hold) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.holds[h] = struct{}{}
	if h.t.scheme.localQueue() {
		c.queueLocked(h.t.keys.Lock).held = h
	}
	return nil
}

// forget removes an ended hold and wakes the local head, which may now ask Redis.
func (c *Client) forget(h *hold) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.holds, h)
	q := c.queues[h.t.keys.Lock]
	if q == nil || q.held != h {
		return
	}
	q.held = nil
	close(q.changed)
	q.changed = make(chan struct{})
	c.dropIfIdleLocked(h.t.keys.Lock, q)
}

func (c *Client) queueLocked(key string) *localQueue {
	q := c.queues[key]
	if q == nil {
		q = &localQueue{changed: make(chan struct{})}
		c.queues[key] = q
	}
	return q
}

func (c *Client) dropIfIdleLocked(key string, q *localQueue) {
	if len(q.waiters) == 0 && q.held == nil && c.queues[key] == q {
		delete(c.queues, key)
	}
}
