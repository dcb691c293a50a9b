package engine

import (
	"context"
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
		w.listenFirst(ctx)
		start := time.Now()
		a := w.t.attempt(ctx, ctx, w.r)
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
		if h, granted := t.share.fromProcess(ctx, r); h != nil && granted {
			return h.startGranted()
		} else if h != nil {
			return h.outer, nil
		}
		changed := t.share.changed(r, false)
		if changed == nil {
			return nil, nil
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return nil, gaveUp(t.name, ctx, -1)
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
		return 0, gaveUpAfter(t.name, ctx, w.left, w.lastErr)
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
	if t.policy.waitList || t.share.refreshes() {
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

// listenFirst listens before an attempt of a wait that does not listen yet, where the
// kind allows it (policy.listenFirst) and its channels are subscribed already: then
// nothing published after the attempt lands is missed, and a refusal needs no look again
// (next). Otherwise the wait listens after its first refusal, as every kind does.
func (w *waiting) listenFirst(ctx context.Context) {
	t, r := w.t, w.r
	if w.listened || !t.policy.listenFirst || len(t.c.nodes) != 1 {
		return
	}
	n := t.c.nodes[0]
	if r.grants == nil {
		r.grants = make(chan scripts.Grant, 4)
	}
	wake := make(chan struct{}, 1)
	watch := n.hub.WatchSubscribed(ctx, t.keys.Lock, t.scheme.channels(t, r, n), wake)
	if watch == nil {
		return
	}
	w.wake, w.watches, w.listened = wake, []*notify.Watch{watch}, true
}

// rejoin makes the request ask anew, for an attempt that found its token (its waiter id,
// or its process's standing request) served or left (a grant to it lapsed before it heard
// of it; an acquisition undone after its reply was lost): Redis never takes or lists those
// again (gone.lua), so that a late request of theirs cannot bring them back. An
// old id leaves the lists of the other nodes; the waiter listens again, on the new id's
// channels, after its next attempt.
func (w *waiting) rejoin() {
	r := w.r
	w.t.share.rejoin()
	if w.t.policy.waitList {
		leaveWaitList(r)
		r.waiter = r.t.c.newToken()
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
	changed := w.t.share.changed(w.r, true)
	timer := time.NewTimer(sleep)
	defer timer.Stop()
	select {
	case <-w.wake:
	case <-changed:
	case <-timer.C:
	case <-ctx.Done():
		return gaveUpAfter(w.t.name, ctx, w.left, w.lastErr)
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
		return gaveUp(t.name, ctx, -1)
	case <-t.c.done:
		return ErrClosed
	}
}

func drain(ch chan struct{}) {
	select {
	case <-ch:
	default:
	}
}
