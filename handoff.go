package dlock

import (
	"time"
)

// Hand-off: how a hot Mutex stays busy within a process.
//
// Within a process, Unlock hands the hold to the next goroutine waiting in the local
// queue, without a round trip: the lock key keeps this process's token in Redis the whole
// time, so to every other process it is one hold that lasted longer; the successor inherits
// the deadline and the renewal. It gets its own fencing token from a block reserved when
// the lock was taken (INCRBY instead of INCR, one token per local waiter then queued), so
// its token is above its predecessor's and below any later acquisition's. The block bounds
// the hand-offs to one round of the local queue as it was when the lock was taken:
// goroutines that queued later go through Redis, where other processes get their turn.
//
// Between processes, the lock goes round in turns: see turns.go.

// maxReserve bounds the fencing tokens reserved for hand-offs by one acquisition.
const maxReserve = 64

// handOff passes h, which Unlock is ending, to the next goroutine of this process waiting
// for the lock, and reports whether it did. It does not when h may hand off no more (no
// token left in its block, or one round of the local queue served), no one waits, the
// Client is closing, or the lease has less than a third of its length left (a renewed
// lease always has two thirds; a granted one, whose first length is at most grantLength,
// too until its first renewal): then its renewals are failing, the successor would
// inherit a lease about to be lost, and a release through Redis tells it the truth.
func (h *hold) handOff() bool {
	t, c := h.t, h.c
	if !t.scheme.handsOff() || h.spare == 0 || !t.cfg.renew {
		// A NoRenew lease lasts its TTL from its acquisition: a successor would inherit
		// only what is left of it.
		return false
	}
	h.mu.Lock()
	ttl, deadline := h.ttl, h.deadline
	h.mu.Unlock()
	if time.Until(deadline) < min(ttl, grantLength)/3 {
		return false
	}

	next := &hold{c: c, t: t, token: h.token, fence: h.fence + 1, spare: h.spare - 1, ttl: ttl, deadline: deadline}
	next.entry.Value = next

	c.mu.Lock()
	q := c.queues[t.keys.Lock]
	if c.closed || q == nil || q.held != h || len(q.waiters) == 0 || q.waiters[0].cfg != t.cfg {
		// A waiter that locked a handle with other options (TTL, NoRenew) asks Redis for
		// a lease of its own making.
		c.mu.Unlock()
		return false
	}
	w := q.waiters[0]
	next.bind(w.ctx)
	c.holds[next] = struct{}{}
	q.held = next
	w.handed = next
	q.notifyLocked()
	c.mu.Unlock()

	// Renewed like h would have been: its last renewal started about ttl before the
	// deadline, and the next is due a third of the way. If the scheduler has stopped,
	// Close is under way and releases next with every other hold.
	var renewAt time.Time
	if t.cfg.renew {
		renewAt = deadline.Add(-2 * ttl / 3)
	}
	if c.sched.Add(&next.entry, renewAt, ttl/6, deadline) && next.ended() {
		c.sched.Remove(&next.entry) // already unlocked by the waiter it was handed to
	}
	h.end(ErrReleased, "unlocked; handed to the next waiter in this process")
	return true
}

// takeHandoff returns the hold handed to w, if any; the caller now owns it.
func (c *Client) takeHandoff(w *localWaiter) *hold {
	if w == nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	h := w.handed
	w.handed = nil
	return h
}
