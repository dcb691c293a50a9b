package dlock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"

	"github.com/seed51c676c8/dlock/internal/notify"
)

// Waiting. A waiter never polls at a fixed rate. It wakes when:
//   - a dlock holder releases: the release script publishes on the lock's channel;
//   - another program deletes the key, or it expires: the server's keyspace event, when
//     the server publishes them (notify-keyspace-events with K and g, x);
//   - the holder's lease runs out: the acquire script replied with its remaining time;
//   - this process releases its own hold: the local queue is told directly.
// Pub/sub may lose a message across a reconnect; the remaining time bounds that loss. When
// the holder's key has no expiry and nothing can be heard, the waiter backs off
// exponentially up to maxBackoff.

const (
	minBackoff = 5 * time.Millisecond
	maxBackoff = time.Second
	// maxFailedAttempts is how many attempts in a row may fail to reach a verdict (nodes
	// down, unreachable or hung) before Lock returns their errors rather than waiting on:
	// enough to ride out a reconnect, few enough that an outage is reported, not hidden
	// until ctx ends.
	maxFailedAttempts = 5
)

// lock acquires t for r, waiting until ctx is done unless r.try is set.
func (t *target) lock(ctx context.Context, r *request) (*Lease, error) {
	c := t.c
	if err := c.usable(); err != nil {
		return nil, err
	}
	if t.err != nil {
		return nil, t.err
	}
	if t.scheme.reentrant() {
		if h := heldIn(ctx, c, t.scheme.kind(), t.keys.Lock); h != nil {
			return newInnerLease(h, ctx), nil
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, t.gaveUp(ctx, -1)
	}
	if t.scheme.queued() || t.scheme.stable() {
		r.waiter = newToken() // an id in Redis wait lists; a Mutex or a reader needs none
	}
	if err := c.enter(); err != nil {
		return nil, err
	}
	defer c.inflight.Done()
	if r.try {
		lease, err := t.tryLock(ctx, r)
		if err != nil && t.scheme.queued() && t.scheme.stable() {
			// A try never queues, but its attempt may have landed after a timeout: a stable
			// token is not undone by the attempt, so leave, which releases what landed.
			t.leaveQueue(r)
		}
		return lease, err
	}

	if t.scheme.localQueue() {
		r.local = &r.wait
		q := c.join(t.keys.Lock, ctx, t.cfg, r.local)
		lease, err := t.waitTurn(ctx, r)
		if err != nil && t.scheme.queued() {
			t.leaveQueue(r)
		}
		untaken, leaveTurns, ask := c.leave(t.keys.Lock, q, r.local)
		if untaken != nil {
			// Handed over as this caller gave up: pass it on, or release it.
			release, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.nodeTimeout(t.cfg.ttl))
			_ = untaken.release(release)
			cancel()
		}
		if leaveTurns {
			t.leaveTurns(ask)
		}
		return lease, err
	}
	lease, err := t.wait(ctx, r)
	if err != nil && t.scheme.queued() {
		t.leaveQueue(r)
	}
	return lease, err
}

// waitTurn waits for the caller's turn in the local queue, then for the lock.
func (t *target) waitTurn(ctx context.Context, r *request) (*Lease, error) {
	select {
	case <-r.local.turn:
	case <-ctx.Done():
		return nil, t.gaveUp(ctx, -1)
	case <-t.c.done:
		return nil, ErrClosed
	}
	return t.wait(ctx, r)
}

// wait makes attempts until one succeeds, ctx ends, the Client closes or nodes keep failing.
func (t *target) wait(ctx context.Context, r *request) (*Lease, error) {
	c := t.c
	var wake chan struct{} // made when the first attempt fails: an uncontended Lock needs none
	var watches []*notify.Watch
	defer func() {
		if len(watches) > 0 {
			// In the background: a node that went silent holds up its subscriptions'
			// bookkeeping until the client's read timeout, which must not delay Lock.
			go closeAll(watches)
		}
	}()
	listening := false
	failures := 0 // consecutive attempts that reached no verdict
	splits := 0   // consecutive split votes
	var lastErr error
	backoff := minBackoff
	left := time.Duration(-1)
	for {
		if h := c.takeHandoff(r.local); h != nil {
			return &h.outer, nil
		}
		if h := t.takeGrant(r, ctx); h != nil {
			return t.startGranted(h)
		}
		if held, changed := t.localSignal(r.local, false); held {
			// This process holds the lock: wait for it locally, no round trip.
			select {
			case <-changed:
				continue
			case <-ctx.Done():
				return nil, t.gaveUp(ctx, -1)
			case <-c.done:
				return nil, ErrClosed
			}
		}
		start := time.Now()
		a := t.acquireOnce(ctx, ctx, r)
		if a.h != nil {
			return t.start(a.h, ctx, start)
		}
		lastErr = a.err
		if ctx.Err() != nil {
			return nil, t.gaveUpAfter(ctx, left, lastErr)
		}
		if a.err == nil {
			failures = 0
		}
		if !a.split {
			splits = 0
		}
		var sleep time.Duration
		switch {
		case a.err != nil && a.permanent:
			return nil, a.err
		case a.err != nil:
			failures++
			if failures >= maxFailedAttempts {
				return nil, a.err
			}
			c.cfg.logger.Debug("dlock: lock attempt failed; retrying", "name", t.name, "err", a.err)
			sleep, backoff = jitter(backoff), min(2*backoff, maxBackoff)
		case !listening:
			// Listen before waiting, then look again: a release between the attempt and
			// the subscription would otherwise go unheard.
			wake = make(chan struct{}, 1)
			if r.grants == nil {
				r.grants = make(chan string, 4)
			}
			watches = t.watch(ctx, r, wake)
			listening = true
			if len(watches) > 0 {
				continue
			}
			sleep = minBackoff
		case a.split:
			// Contenders split the votes and undid their partial holds, which publishes:
			// ignore those wake-ups and retry after a random delay, so that they do not
			// collide again.
			if err := t.sleep(ctx, splitDelay(splits)); err != nil {
				return nil, err
			}
			splits++
			drain(wake)
			continue
		default:
			left = a.left
			if left >= 0 && len(watches) > 0 {
				sleep, backoff = left+time.Millisecond, minBackoff
			} else {
				sleep, backoff = jitter(backoff), min(2*backoff, maxBackoff)
				if left >= 0 {
					sleep = min(sleep, left+time.Millisecond)
				}
			}
		}
		if t.scheme.queued() || t.turns() {
			// The wait-list entry (or the Mutex's standing request) dies unless refreshed;
			// an attempt refreshes it.
			sleep = min(sleep, waiterRefresh*time.Millisecond)
		}
		_, changed := t.localSignal(r.local, true) // this process may take the lock meanwhile (TryLock)
		timer := time.NewTimer(sleep)
		select {
		case <-wake:
		case <-changed:
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, t.gaveUpAfter(ctx, left, lastErr)
		case <-c.done:
			timer.Stop()
			return nil, ErrClosed
		}
		timer.Stop()
	}
}

// leaveQueue takes a waiter that gave up out of the wait lists on every node, without
// waiting for the replies, so that it does not hold up the waiters behind it. An entry a
// node misses expires by itself.
func (t *target) leaveQueue(r *request) {
	t.c.sendAll(nil, time.Duration(waiterTTL)*time.Millisecond, func(call *batch.Call) bool {
		return t.scheme.leave(t, r, call)
	})
}

// sleep waits d, or returns the error that ended the wait.
func (t *target) sleep(ctx context.Context, d time.Duration) error {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return t.gaveUp(ctx, -1)
	case <-t.c.done:
		return ErrClosed
	}
}

// splitDelay is the random pause after the split vote that follows splits others in a
// row: a few round trips, spread so that the contenders come back one at a time. The
// spread doubles with each split in a row, up to 160ms: nodes held by no one with a
// majority may also be a holder's that lost it, which only its expiry clears.
func splitDelay(splits int) time.Duration {
	return time.Millisecond + rand.N(20*time.Millisecond<<min(splits, 3))
}

func drain(ch chan struct{}) {
	select {
	case <-ch:
	default:
	}
}

// tryLock makes one attempt. A lock this process holds is refused without a round trip.
func (t *target) tryLock(ctx context.Context, r *request) (*Lease, error) {
	if h := t.heldHere(); h != nil {
		return nil, fmt.Errorf("dlock: try lock %q: %w (by this process, lease valid for %v more)", t.name, ErrNotAcquired, time.Until(h.validUntil()).Round(time.Millisecond))
	}
	start := time.Now()
	a := t.acquireOnce(ctx, ctx, r)
	switch {
	case a.h != nil:
		return t.start(a.h, ctx, start)
	case a.err != nil:
		return nil, a.err
	case a.left >= 0:
		return nil, fmt.Errorf("dlock: try lock %q: %w (the holder's lease has %v left)", t.name, ErrNotAcquired, a.left)
	}
	return nil, fmt.Errorf("dlock: try lock %q: %w", t.name, ErrNotAcquired)
}

// gaveUpAfter is gaveUp with what the last attempt ran into, if it failed.
func (t *target) gaveUpAfter(ctx context.Context, left time.Duration, lastErr error) error {
	if lastErr == nil {
		return t.gaveUp(ctx, left)
	}
	return fmt.Errorf("%w; the last attempt: %w", t.gaveUp(ctx, left), lastErr)
}

// gaveUp is the error of a wait that ctx ended; it wraps ctx.Err().
func (t *target) gaveUp(ctx context.Context, left time.Duration) error {
	if left >= 0 {
		return fmt.Errorf("dlock: lock %q: gave up waiting: %w (the holder's lease had %v left)", t.name, ctx.Err(), left)
	}
	return fmt.Errorf("dlock: lock %q: gave up waiting: %w", t.name, ctx.Err())
}

// watch subscribes, on every node at once, to the lock's release channel and its keyspace
// channel, all sending on wake. A node that cannot be subscribed to within the per-node
// timeout is left out, and found silent (node.silentUntil); a node already silent is not
// waited for. The waiter still wakes at the holder's expiry.
func (t *target) watch(ctx context.Context, r *request, wake chan struct{}) []*notify.Watch {
	c := t.c
	timeout := max(c.nodeTimeout(t.cfg.ttl), 100*time.Millisecond)
	sub, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	// Room for every node (nil for one that failed): a subscription that comes in after
	// the wait has given up on it must not block.
	results := make(chan subscribed, len(c.nodes))
	awaited := make([]bool, len(c.nodes))
	for i, n := range c.nodes {
		awaited[i] = len(c.nodes) == 1 || !n.silent()
		channels := t.scheme.channels(t, r, n)
		go func() {
			w, err := n.hub.Watch(sub, t.keys.Lock, channels, wake)
			if err != nil {
				c.cfg.logger.Debug("dlock: cannot listen for releases; relying on expiry", "node", n.name, "err", err)
			}
			results <- subscribed{w, i}
		}()
	}
	out, pending := collect(sub, results, awaited)
	if pending > 0 {
		// A silent node can hold its subscription up until the client's read timeout,
		// longer than a whole lease: wait on without it, and close what it gives late.
		go closeLate(results, pending)
	}
	if ctx.Err() == nil && len(c.nodes) > 1 {
		for i, late := range awaited {
			if late {
				c.nodes[i].missed(timeout)
			}
		}
	}
	return out
}

// subscribed is node's subscription for watch: nil if it failed.
type subscribed struct {
	w    *notify.Watch
	node int
}

// collect gathers the subscriptions of the awaited nodes, until they are all in or ctx
// ends, and those of the others that come in meanwhile. It clears awaited[i] as node i's
// comes in, and reports how many it did not receive.
func collect(ctx context.Context, results <-chan subscribed, awaited []bool) (out []*notify.Watch, pending int) {
	left := 0
	for _, a := range awaited {
		if a {
			left++
		}
	}
	for pending = len(awaited); pending > 0 && left > 0; pending-- {
		select {
		case s := <-results:
			if awaited[s.node] {
				awaited[s.node] = false
				left--
			}
			if s.w != nil {
				out = append(out, s.w)
			}
		case <-ctx.Done():
			return out, pending
		}
	}
	return out, pending
}

func closeAll(watches []*notify.Watch) {
	for _, w := range watches {
		w.Close()
	}
}

// closeLate closes the watches of the pending subscriptions that a wait gave up on.
func closeLate(results <-chan subscribed, pending int) {
	for ; pending > 0; pending-- {
		if s := <-results; s.w != nil {
			s.w.Close()
		}
	}
}
