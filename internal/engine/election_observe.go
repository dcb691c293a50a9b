package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock/internal/notify"
)

// Observe sends conv of each reading of e that differs from the one before on the
// returned channel, which holds one: a reading the reader has not taken yet is replaced by
// a newer one, so the reader may miss changes but never the latest. It reads the election
// when a write or a release is published (subscribed on every node before the reading it
// could change), when the leader's term would end unless renewed (an expiry is
// published only where keyspace events are on), and every TTL in case a message was lost; after a failed reading it sends the
// error, logs it and reads again with backoff. The channel is closed when ctx ends or the
// Client is closed.
func Observe[T any](ctx context.Context, e *Election, conv func(Reading) T) <-chan T {
	out := make(chan T, 1)
	o := &observing[T]{e: e, out: out, conv: conv, wake: make(chan struct{}, 1)}
	go o.run(ctx)
	return out
}

type observing[T any] struct {
	e    *Election
	out  chan T
	conv func(Reading) T
	wake chan struct{} // a message on the election's channels, or a subscription made
	last Reading       // what was sent last, if sent
	sent bool
}

func (o *observing[T]) run(ctx context.Context) {
	defer close(o.out)
	c := o.e.t.c
	if err := checkValue(o.e.t, ""); err != nil {
		o.publish(Reading{Err: err})
		return
	}
	ctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer stop()
	for _, n := range c.nodes {
		wg.Go(func() { o.listen(ctx, n) })
	}
	failures := 0
	stale := o.wake
	for {
		r, err := o.e.read(ctx, stale)
		if ctx.Err() != nil || c.Usable() != nil {
			return
		}
		if err == errSuperseded {
			// Woken while it waited for a node: read again at once, but only once, so that
			// changes published faster than a reading still let one finish (and do not
			// pile up readings left to finish in the background). A change published
			// during that reading stays in wake, and is read after it.
			stale = nil
			continue
		}
		stale = o.wake
		next := max(o.e.t.cfg.TTL, time.Second)
		switch {
		case err == nil:
			failures = 0
			next = min(next, max(time.Until(r.until)+time.Millisecond, time.Millisecond))
		case errors.Is(err, ErrNoLeader):
			failures, r = 0, Reading{Err: err}
		default:
			failures++
			next, r = backoff(failures), Reading{Err: err}
			c.cfg.Logger.Warn("dlock: cannot read the election; trying again", "name", o.e.t.name, "in", next, "err", err)
		}
		o.publish(r)
		if !o.sleep(ctx, next) {
			return
		}
	}
}

// listen subscribes to the election's channels on n, trying again with backoff until it
// can, and keeps the subscription until ctx ends (the hub renews it after a reconnect, and
// wakes its waiters then). A subscription made wakes the reader: what was published before
// it was missed.
func (o *observing[T]) listen(ctx context.Context, n *Node) {
	t := o.e.t
	lock := n.keyspaceChannel(t.keys.Lock)
	lock.Route = changesReading
	channels := []notify.Channel{n.releaseChannel(t.keys.Channel), n.releaseChannel(t.keys.Leader()), lock}
	for failures := 0; ; failures++ {
		sub, cancel := context.WithTimeout(ctx, max(nodeTimeout(t.c, t.cfg.TTL), time.Second))
		w, err := n.hub.Watch(sub, t.keys.Lock, channels, o.wake)
		cancel()
		if err == nil {
			o.poke()
			<-ctx.Done()
			w.Close()
			return
		}
		t.c.cfg.Logger.Debug("dlock: cannot listen for the election's changes; reading it on a timer meanwhile", "name", t.name, "node", n.Name, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff(failures)):
		}
	}
}

// changesReading routes the lock key's keyspace events for an observer: "expire" is a
// renewal's PEXPIRE, on every renewal of the leader, and changes no reading (a new term's
// also comes with its record's write, which publishes); "expired", "del" and the others
// may end the term.
func changesReading(event string) time.Duration {
	if event == "expire" {
		return -1
	}
	return 0
}

func (o *observing[T]) poke() {
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// publish sends r unless it says what was sent last, replacing a value not taken yet.
func (o *observing[T]) publish(r Reading) {
	if o.sent && r.same(o.last) {
		return
	}
	o.last, o.sent = r, true
	v := o.conv(r)
	select {
	case <-o.out: // not taken: the latest replaces it
	default:
	}
	o.out <- v // the only sender, and the channel is empty now
}

// sleep waits for d, a wake-up, or the end; it reports false at the end.
func (o *observing[T]) sleep(ctx context.Context, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-o.e.t.c.done:
		return false
	case <-o.wake:
	case <-timer.C:
	}
	return true
}
