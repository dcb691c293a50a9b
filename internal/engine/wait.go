package engine

import (
	"context"
	"math/rand/v2"
	"time"

	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// Waiting. A waiter never polls at a fixed rate. It wakes when:
//   - a dlock holder releases: the release script publishes on the lock's channel;
//   - another program deletes or overwrites the key, or it expires: CLIENT TRACKING
//     (tracking.go), or where the server refuses it a re-check within maxRecheck; and the
//     server's keyspace event, when it publishes them (notify-keyspace-events with K, g, x);
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

func newWaiting(r *request) *waiting {
	return &waiting{t: r.t, r: r, backoff: minBackoff, left: -1}
}

// wait makes attempts until one succeeds, ctx ends, the Client closes or nodes keep failing.
func (w *waiting) wait(ctx context.Context) (*Lease, error) {
	defer w.stopListening()
	for {
		if lease, err := w.fromProcess(ctx); lease != nil || err != nil {
			return lease, err
		}
		start := time.Now()
		a := acquireOnce(ctx, ctx, w.r)
		if a.h != nil {
			return a.h.startAcquired(start)
		}
		if a.rejoin {
			w.rejoin()
			continue
		}
		sleep, err := w.next(ctx, a)
		if err != nil {
			return nil, err
		}
		if sleep > 0 {
			if err := w.pause(ctx, sleep); err != nil {
				return nil, err
			}
		}
	}
}

// fromProcess returns what this process can give the caller without asking Redis: a hold
// handed over by a local Unlock, or one a release granted. While this process holds the
// lock itself (and has not handed it to the caller), it waits here, with no round trip.
// It returns neither a lease nor an error when the caller must ask Redis.
func (w *waiting) fromProcess(ctx context.Context) (*Lease, error) {
	t, r := w.t, w.r
	for {
		if h := t.coord.takeHandoff(r); h != nil {
			return h.outer, nil
		}
		if h := takeGrant(ctx, r); h != nil {
			return h.startGranted()
		}
		changed := t.coord.changed(r, false)
		if changed == nil {
			return nil, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, t.gaveUp(ctx, -1)
		case <-t.c.done:
			return nil, ErrClosed
		}
	}
}

// waiting is what a wait carries from one attempt to the next.
type waiting struct {
	t        *Target
	r        *request
	wake     chan struct{} // made when the first attempt fails: an uncontended Lock needs none
	watches  []*notify.Watch
	tracking *tracking // the lock key's CLIENT TRACKING, when the kind tracks (tracking.go)
	listened bool
	failures int // consecutive attempts that reached no verdict
	splits   int // consecutive split votes
	lastErr  error
	backoff  time.Duration
	left     time.Duration // the holder's time left, as the last refusal said; <0 unknown
}

// next decides what follows the failed attempt a: how long to pause before the next one
// (0: at once), or the error that ends the wait.
func (w *waiting) next(ctx context.Context, a attempt) (time.Duration, error) {
	t := w.t
	w.lastErr = a.err
	if ctx.Err() != nil {
		return 0, t.gaveUpAfter(ctx, w.left, w.lastErr)
	}
	if a.err == nil {
		w.failures = 0
	}
	if !a.split {
		w.splits = 0
	}
	var sleep time.Duration
	switch {
	case a.err != nil && a.permanent:
		return 0, a.err
	case a.err != nil:
		if w.failures++; w.failures >= maxFailedAttempts {
			return 0, a.err
		}
		t.c.cfg.Logger.Debug("dlock: lock attempt failed; retrying", "name", t.name, "err", a.err)
		sleep = w.backOff()
	case !w.listened:
		// Listen before waiting, then look again: a release between the attempt and the
		// subscription would otherwise go unheard.
		if w.listen(ctx) {
			return 0, nil
		}
		sleep = minBackoff
	case a.split:
		// Contenders split the votes and undid their partial holds, which publishes:
		// ignore those wake-ups and retry after a random delay, so that they do not
		// collide again.
		if err := w.sleep(ctx, splitDelay(w.splits)); err != nil {
			return 0, err
		}
		w.splits++
		drain(w.wake)
		return 0, nil
	default:
		if w.tracking.arm(ctx, t, a.refusers) {
			return 0, nil // a node that refused no longer has the key
		}
		sleep = w.tracking.bound(w.untilFree(a.left))
	}
	if t.policy.waitList || t.coord.takesTurns() {
		// The wait-list entry (or the Mutex's standing request) dies unless refreshed;
		// an attempt refreshes it.
		sleep = min(sleep, waiterRefresh*time.Millisecond)
	}
	return sleep, nil
}

// backOff returns the next exponential back-off, with jitter.
func (w *waiting) backOff() time.Duration {
	sleep := jitter(w.backoff)
	w.backoff = min(2*w.backoff, maxBackoff)
	return sleep
}

// untilFree is the pause after a refusal that said the holder has left (<0: unknown):
// until then when a release can be heard, else a back-off no longer than that.
func (w *waiting) untilFree(left time.Duration) time.Duration {
	w.left = left
	if left >= 0 && len(w.watches) > 0 {
		w.backoff = minBackoff
		return left + time.Millisecond
	}
	sleep := w.backOff()
	if left >= 0 {
		sleep = min(sleep, left+time.Millisecond)
	}
	return sleep
}

// listen subscribes to what wakes the waiter, and reports whether any node listens.
func (w *waiting) listen(ctx context.Context) bool {
	w.wake = make(chan struct{}, 1)
	if w.r.grants == nil {
		w.r.grants = make(chan scripts.Grant, 4)
	}
	w.watches = watch(ctx, w.r, w.wake)
	w.tracking = track(ctx, w.r, w.wake)
	w.listened = true
	return len(w.watches) > 0
}

// rejoin makes the request ask anew, for an attempt that found its token (its waiter id,
// or its process's standing request) served or left (a grant to it lapsed before it heard
// of it; an acquisition undone after its reply was lost): Redis never takes or lists those
// again (gone.lua), so that a late request of theirs cannot bring them back. An
// old id leaves the lists of the other nodes; the waiter listens again, on the new id's
// channels, after its next attempt.
func (w *waiting) rejoin() {
	r := w.r
	w.t.coord.dropAsk()
	if w.t.policy.waitList {
		r.leaveQueue()
		r.waiter = newToken()
		r.firstSent = time.Time{}
	}
	w.stopListening()
	w.watches, w.tracking, w.listened = nil, nil, false
}

func (w *waiting) stopListening() {
	w.tracking.close()
	if len(w.watches) > 0 {
		// In the background: a node that went silent holds up its subscriptions'
		// bookkeeping until the client's read timeout, which must not delay Lock.
		go closeAll(w.watches)
	}
}

// pause waits sleep, or until a wake-up or this process's hold of the lock changes
// (this process may take the lock meanwhile: TryLock), or the wait ends.
func (w *waiting) pause(ctx context.Context, sleep time.Duration) error {
	changed := w.t.coord.changed(w.r, true)
	timer := time.NewTimer(sleep)
	defer timer.Stop()
	select {
	case <-w.wake:
	case <-changed:
	case <-timer.C:
	case <-ctx.Done():
		return w.t.gaveUpAfter(ctx, w.left, w.lastErr)
	case <-w.t.c.done:
		return ErrClosed
	}
	return nil
}

// sleep waits d, or returns the error that ended the wait.
func (w *waiting) sleep(ctx context.Context, d time.Duration) error {
	t := w.t
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

// watch subscribes, on every node at once, to the lock's release channel and its keyspace
// channel, all sending on wake. A node that cannot be subscribed to within the per-node
// timeout is left out, and found silent (Node.silentUntil); a node already silent is not
// waited for. The waiter still wakes at the holder's expiry.
func watch(ctx context.Context, r *request, wake chan struct{}) []*notify.Watch {
	if r.t.parts != nil {
		return watchParts(ctx, r, wake) // a MultiMutex over several hash slots
	}
	return watchTarget(ctx, r.t, r, wake)
}

// watchTarget is watch of t's channels for r (t is r.t, or one part of it).
func watchTarget(ctx context.Context, t *Target, r *request, wake chan struct{}) []*notify.Watch {
	c := t.c
	timeout := max(c.nodeTimeout(t.cfg.TTL), 100*time.Millisecond)
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
				c.cfg.Logger.Debug("dlock: cannot listen for releases; relying on expiry", "node", n.Name, "err", err)
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
