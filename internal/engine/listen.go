package engine

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock/internal/notify"
)

// Listening: what wakes a waiter (see wait.go) is subscribed here, on every node at once.

// watch subscribes, on every node at once, to the lock's release channel and its keyspace
// channel, all sending on wake. A node that cannot be subscribed to within the per-node
// timeout is left out, and found silent (Node.silentUntil); a node already silent is not
// waited for. The waiter still wakes at the holder's expiry.
func watch(ctx context.Context, r *request, wake chan struct{}) []*notify.Watch {
	parts := r.t.parts
	if len(parts) == 1 {
		return watchTarget(ctx, parts[0], r, wake)
	}
	// A MultiMutex over several hash slots: the channels of every part, each on the shard
	// that owns its slot, subscribed at once.
	each := make([][]*notify.Watch, len(parts))
	var wg sync.WaitGroup
	for i, p := range parts {
		wg.Go(func() { each[i] = watchTarget(ctx, p, r, wake) })
	}
	wg.Wait()
	return slices.Concat(each...)
}

// watchTarget is watch of t's channels for r (t is r.t, or one part of it).
func watchTarget(ctx context.Context, t *Target, r *request, wake chan struct{}) []*notify.Watch {
	c := t.c
	timeout := max(nodeTimeout(c, t.cfg.TTL), 100*time.Millisecond)
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
