// Package notify wakes waiters when a lock is released. A Hub keeps one pub/sub connection
// per Redis node, shared by every waiter of a Client; waiters register the channels they
// care about and are woken by any message on them. It also tracks keys (Track): a waiter
// is woken by the next write to a key by anyone, through CLIENT TRACKING (tracking.go).
//
// Pub/sub delivers at most once: a message sent while the connection is down is lost. The
// hub therefore wakes every waiter of a channel when that channel is subscribed again after
// a reconnect, and waiters never rely on a message alone (the lock engine also wakes at the
// holder's expiry).
//
// Mutexes: Hub.mu, and per node a nodeConn's mu then its ops (never the other order). A
// tracker's mu guards its keys, epoch and refusal and each Key's armed state; its tracked
// connection belongs to whoever took it from the conn channel, which may then take mu
// (never the other order).
package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Channel is a pub/sub channel; Sharded channels (Redis Cluster) use SSUBSCRIBE.
type Channel struct {
	Name    string
	Sharded bool
	// Once is set for a channel that only one wait ever listens on (the channel of a
	// FairMutex waiter without a Client id): it is unsubscribed as soon as its waiter
	// leaves, without lingering.
	Once bool
	// Route, when set, says what a message on the channel means for its waiter: it is
	// called with each message's payload and returns how long to wait before waking the
	// waiter, 0 for at once, or a negative duration for not at all (a message the waiter
	// does not wait for). A message that passes the lock to someone else (another
	// process's turn, say) wakes the waiter only once that could have lapsed; a waiter has
	// one such deferred wake-up pending at a time. Route runs on the node's reader
	// goroutine with the node locked: it must not block. The lock's protocol lives with
	// whoever sets it; this package only knows channels.
	Route func(payload string) (after time.Duration)
}

// linger is how long a channel stays subscribed after its last waiter left, so that a hot
// lock does not pay a SUBSCRIBE round trip for every wait.
const linger = 30 * time.Second

// ErrClosed is returned by Watch after Close.
var ErrClosed = errors.New("dlock: notifications closed")

// Hub routes subscriptions to the node that owns them.
type Hub struct {
	rdb    redis.UniversalClient
	logger *slog.Logger
	linger time.Duration // linger, except in tests; set before the first Watch
	idle   time.Duration // idlePing, except in tests; set before the first Track

	mu       sync.Mutex
	nodes    map[string]*nodeConn // by node address; guarded by mu
	trackers map[string]*tracker  // by node address; guarded by mu
	closed   bool                 // guarded by mu
}

// NewHub returns a hub for one deployment. It connects lazily, on the first Watch.
func NewHub(rdb redis.UniversalClient, logger *slog.Logger) *Hub {
	return &Hub{
		rdb: rdb, logger: logger, linger: linger, idle: idlePing,
		nodes: make(map[string]*nodeConn), trackers: make(map[string]*tracker),
	}
}

// Watch subscribes to channels on the node that owns routeKey and returns once the server
// has confirmed every subscription, so that no message published after Watch returns is
// missed. A message on any of the channels then sends a value on wake without blocking:
// give it a capacity of one, and share it between watches to wait on several nodes at
// once (a new watch neither sends on wake nor takes a wake-up from it; after a reconnect
// the waiters are woken once, as they may have missed a message). ctx bounds the wait.
// The caller must Close the watch.
func (h *Hub) Watch(ctx context.Context, routeKey string, channels []Channel, wake chan struct{}) (*Watch, error) {
	if err := ctx.Err(); err != nil {
		// Checked first: a subscription already confirmed would win the select below at
		// random.
		return nil, err
	}
	node, err := h.node(ctx, routeKey, true)
	if err != nil {
		return nil, err
	}
	w := &Watch{node: node, channels: channels, c: wake}
	ready, err := node.add(ctx, w)
	if err != nil {
		return nil, err
	}
	for _, r := range ready {
		select {
		case <-r:
		case <-ctx.Done():
			w.Close()
			return nil, ctx.Err()
		case <-node.done:
			w.Close()
			return nil, ErrClosed
		}
	}
	return w, nil
}

// WatchSubscribed is Watch without a round trip: it registers the watch only if every
// channel is subscribed and confirmed already (for another watch, or lingering), and
// returns nil otherwise, having registered nothing. As with Watch, no message published
// after it returns is missed, and the caller must Close the watch. ctx bounds only the
// reading of a Cluster's slot map.
func (h *Hub) WatchSubscribed(ctx context.Context, routeKey string, channels []Channel, wake chan struct{}) *Watch {
	if ctx.Err() != nil {
		return nil
	}
	node, err := h.node(ctx, routeKey, false)
	if err != nil || node == nil {
		return nil
	}
	w := &Watch{node: node, channels: channels, c: wake}
	if !node.addSubscribed(w) {
		return nil
	}
	return w
}

// node returns the connection to the node that owns routeKey; without create, nil if
// there is none yet.
func (h *Hub) node(ctx context.Context, routeKey string, create bool) (*nodeConn, error) {
	sub := subscriber(h.rdb)
	addr := ""
	if cc, ok := h.rdb.(*redis.ClusterClient); ok {
		master, err := cc.MasterForKey(ctx, routeKey)
		if err != nil {
			return nil, err
		}
		sub, addr = master, master.Options().Addr
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	n := h.nodes[addr]
	if n == nil && create {
		n = newNodeConn(sub, h.logger, h.linger)
		h.nodes[addr] = n
	}
	return n, nil
}

// Track registers key, on the node that owns routeKey, for a wake-up on wake at the next
// write to it by anyone (tracking.go): a DEL, UNLINK, SET, a script's write, its expiry.
// It sends nothing to Redis: Key.Arm does, and must be called before the first wake-up
// and after each. It fails with an error that wraps ErrTrackingRefused when the node cannot
// track keys, and with ctx's error when the Cluster's slot map cannot be read in time.
// The caller must Close the Key.
func (h *Hub) Track(ctx context.Context, routeKey, key string, wake chan struct{}) (*Key, error) {
	tr, err := h.tracker(ctx, routeKey)
	if err != nil {
		return nil, err
	}
	k := &Key{tr: tr, key: key, c: wake}
	tr.mu.Lock()
	if tr.refused != nil {
		tr.mu.Unlock()
		return nil, tr.refused
	}
	ks := tr.keys[key]
	if ks == nil {
		ks = make(map[*Key]struct{})
		tr.keys[key] = ks
	}
	ks[k] = struct{}{}
	tr.mu.Unlock()
	tr.start()
	return k, nil
}

// tracker returns the tracker of the node that owns routeKey, made on first use.
func (h *Hub) tracker(ctx context.Context, routeKey string) (*tracker, error) {
	var node *redis.Client
	switch rdb := h.rdb.(type) {
	case *redis.Client:
		node = rdb
	case *redis.ClusterClient:
		master, err := rdb.MasterForKey(ctx, routeKey)
		if err != nil {
			return nil, err
		}
		node = master
	default:
		return nil, fmt.Errorf("%w: not with a %T (use a *redis.Client or *redis.ClusterClient)", ErrTrackingRefused, h.rdb)
	}
	addr := node.Options().Addr
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil, ErrClosed
	}
	tr := h.trackers[addr]
	if tr != nil && tr.node != node {
		// A Cluster replaced the client of this address (the node left and came back):
		// the old one is closed. Waiters still registered there re-check.
		go tr.close()
		tr = nil
	}
	if tr == nil {
		tr = newTracker(node, h.logger, h.idle)
		h.trackers[addr] = tr
	}
	return tr, nil
}

// Close ends every subscription and tracking and wakes nothing: callers stop waiting on
// their own.
func (h *Hub) Close() {
	h.mu.Lock()
	nodes, trackers := h.nodes, h.trackers
	h.nodes, h.trackers = nil, nil
	h.closed = true
	h.mu.Unlock()
	for _, n := range nodes {
		n.close()
	}
	for _, tr := range trackers {
		tr.close()
	}
}

// Watch is one waiter's registration.
type Watch struct {
	node     *nodeConn
	channels []Channel
	c        chan struct{} // the caller's; a wake-up is kept until the waiter reads it
	once     sync.Once

	// later is the pending deferred wake-up (see Channel.Route), nil when none; guarded by
	// the node's mu.
	later *time.Timer
}

func (w *Watch) wake() {
	select {
	case w.c <- struct{}{}:
	default:
	}
}

// message wakes w for a message on the channel called name: at once, or when its
// channel's Route says so (one pending deferred wake-up at a time). The caller holds the
// node's mu.
func (w *Watch) message(name, payload string) {
	for i := range w.channels {
		ch := &w.channels[i]
		if ch.Name != name {
			continue
		}
		after := routeOf(ch, payload)
		if after < 0 {
			return
		}
		if after > 0 {
			if w.later == nil {
				w.later = time.AfterFunc(after, func() {
					w.node.mu.Lock()
					w.later = nil
					w.node.mu.Unlock()
					w.wake()
				})
			}
			return
		}
		break
	}
	w.wake()
}

func routeOf(ch *Channel, payload string) time.Duration {
	if ch.Route == nil {
		return 0
	}
	return ch.Route(payload)
}

// Close ends the registration; the subscription itself lingers for reuse.
func (w *Watch) Close() { w.once.Do(func() { w.node.remove(w) }) }

type pubsubber interface {
	Subscribe(ctx context.Context, channels ...string) *redis.PubSub
}

func subscriber(rdb redis.UniversalClient) pubsubber { return rdb }
