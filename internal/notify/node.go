package notify

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// nodeConn is one pub/sub connection to one node and the waiters it serves. A single
// goroutine reads from the connection; it runs from the first subscription until close.
type nodeConn struct {
	ps     *redis.PubSub
	logger *slog.Logger
	linger time.Duration
	done   chan struct{} // closed by close

	mu       sync.Mutex
	channels map[string]*channelState // guarded by mu
	started  bool                     // guarded by mu: the reader goroutine runs
	closed   bool                     // guarded by mu: close has begun
	wg       sync.WaitGroup

	// ops orders the (UN)SUBSCRIBE commands as the decisions to send them were taken: it
	// is locked while mu is still held and unlocked once the command is written. Without
	// it, an UNSUBSCRIBE of a lingering channel could reach the server after the SUBSCRIBE
	// of a new watch of the same channel, which would then believe it is subscribed.
	// Lock order: mu, then ops; never mu while holding ops.
	ops sync.Mutex
}

// channelState is one subscribed channel. ready is closed when the server confirms the
// subscription, which wakes nobody (the waiters are all still in Watch); after a reconnect
// the confirmation comes again and wakes every waiter, who may have missed a message.
type channelState struct {
	sharded   bool
	ready     chan struct{}
	confirmed bool
	waiters   map[*Watch]struct{}
	idle      *time.Timer // unsubscribes after linger once waiters is empty
}

func newNodeConn(sub pubsubber, logger *slog.Logger, linger time.Duration) *nodeConn {
	return &nodeConn{
		ps:       sub.Subscribe(context.Background()),
		logger:   logger,
		linger:   linger,
		done:     make(chan struct{}),
		channels: make(map[string]*channelState),
	}
}

// add registers w and subscribes to its channels that are not subscribed yet. It returns
// the channels to wait on for confirmation.
func (n *nodeConn) add(ctx context.Context, w *Watch) ([]chan struct{}, error) {
	var plain, sharded []string
	ready := make([]chan struct{}, 0, len(w.channels))
	n.mu.Lock()
	if n.closed { // the hub closed after it handed out this node
		n.mu.Unlock()
		return nil, ErrClosed
	}
	for _, ch := range w.channels {
		st := n.channels[ch.Name]
		if st == nil {
			st = &channelState{sharded: ch.Sharded, ready: make(chan struct{}), waiters: make(map[*Watch]struct{})}
			n.channels[ch.Name] = st
			if ch.Sharded {
				sharded = append(sharded, ch.Name)
			} else {
				plain = append(plain, ch.Name)
			}
		}
		if st.idle != nil {
			st.idle.Stop()
			st.idle = nil
		}
		st.waiters[w] = struct{}{}
		if !st.confirmed {
			ready = append(ready, st.ready)
		}
	}
	if !n.started {
		n.started = true
		n.wg.Add(1)
		go n.read()
	}
	subscribe := len(plain)+len(sharded) > 0
	if subscribe {
		n.ops.Lock()
	}
	n.mu.Unlock()

	var err error
	if subscribe {
		if len(plain) > 0 {
			err = n.ps.Subscribe(ctx, plain...)
		}
		// One SSUBSCRIBE per channel: the channels of one command must share a slot.
		for _, name := range sharded {
			if err == nil {
				err = n.ps.SSubscribe(ctx, name)
			}
		}
		n.ops.Unlock()
	}
	if err != nil {
		w.Close()
		n.forget(append(plain, sharded...))
		return nil, err
	}
	return ready, nil
}

// addSubscribed registers w if every one of its channels is subscribed and confirmed,
// and reports whether it did.
func (n *nodeConn) addSubscribed(w *Watch) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.closed {
		return false
	}
	for _, ch := range w.channels {
		if st := n.channels[ch.Name]; st == nil || !st.confirmed {
			return false
		}
	}
	for _, ch := range w.channels {
		st := n.channels[ch.Name]
		if st.idle != nil {
			st.idle.Stop()
			st.idle = nil
		}
		st.waiters[w] = struct{}{}
	}
	return true
}

// forget drops channels whose SUBSCRIBE could not be sent, so that the next Watch tries again.
func (n *nodeConn) forget(names []string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, name := range names {
		if st := n.channels[name]; st != nil && !st.confirmed && len(st.waiters) == 0 {
			delete(n.channels, name)
		}
	}
}

func (n *nodeConn) remove(w *Watch) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if w.later != nil {
		w.later.Stop()
		w.later = nil
	}
	for _, ch := range w.channels {
		st := n.channels[ch.Name]
		if st == nil {
			continue
		}
		delete(st.waiters, w)
		if len(st.waiters) == 0 && st.idle == nil && !n.closed {
			name, after := ch.Name, n.linger
			if ch.Once {
				after = 0
			}
			st.idle = time.AfterFunc(after, func() { n.unsubscribeIdle(name) })
		}
	}
}

func (n *nodeConn) unsubscribeIdle(name string) {
	n.mu.Lock()
	st := n.channels[name]
	if st == nil || len(st.waiters) > 0 || st.idle == nil {
		n.mu.Unlock()
		return
	}
	delete(n.channels, name)
	n.ops.Lock()
	n.mu.Unlock()
	defer n.ops.Unlock()
	select {
	case <-n.done:
		return
	default:
	}
	ctx := context.Background()
	if st.sharded {
		_ = n.ps.SUnsubscribe(ctx, name)
	} else {
		_ = n.ps.Unsubscribe(ctx, name)
	}
}

// read delivers messages until close. A broken connection is re-established by go-redis
// on the next Receive, which also subscribes again to every channel.
func (n *nodeConn) read() {
	defer n.wg.Done()
	ctx := context.Background()
	backoff := 10 * time.Millisecond
	for {
		msg, err := n.ps.ReceiveTimeout(ctx, time.Minute)
		select {
		case <-n.done:
			return
		default:
		}
		if err != nil {
			if isTimeout(err) {
				_ = n.ps.Ping(ctx) // a dead connection then fails the next Receive
				continue
			}
			if redis.HasErrorPrefix(err, "CROSSSLOT") {
				// go-redis subscribes again after a reconnect with one SSUBSCRIBE for all
				// sharded channels, which the server refuses unless they share a slot.
				n.resubscribeSharded()
				continue
			}
			n.logger.Debug("dlock: pub/sub connection failed; reconnecting", "err", err)
			n.wakeAll()
			select {
			case <-time.After(backoff):
			case <-n.done:
				return
			}
			backoff = min(2*backoff, time.Second)
			continue
		}
		backoff = 10 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Message:
			n.wakeChannel(m.Channel, m.Payload, false)
		case *redis.Subscription:
			switch m.Kind {
			case "subscribe", "ssubscribe":
				n.wakeChannel(m.Channel, "", true)
			case "sunsubscribe":
				n.dropped(m.Channel)
			}
		}
	}
}

// dropped forgets a sharded channel that the server unsubscribed on its own, as Redis does
// when the node stops serving the channel's slot (a failover, a migration): kept, it would
// stay confirmed, and a watch made on it without a round trip (WatchSubscribed) would hear
// nothing once the slot came back. Its waiters are woken, to ask Redis; the next Watch
// subscribes again. An sunsubscribe this node asked for (unsubscribeIdle) finds its
// channel gone already, or subscribed anew and not yet confirmed: it changes nothing.
func (n *nodeConn) dropped(name string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.channels[name]
	if st == nil || !st.sharded || !st.confirmed {
		return
	}
	delete(n.channels, name)
	if st.idle != nil {
		st.idle.Stop()
	}
	for w := range st.waiters {
		w.wake()
	}
}

// resubscribeSharded subscribes again, one by one, to every sharded channel.
func (n *nodeConn) resubscribeSharded() {
	n.mu.Lock()
	var names []string
	for name, st := range n.channels {
		if st.sharded {
			names = append(names, name)
		}
	}
	n.ops.Lock()
	n.mu.Unlock()
	defer n.ops.Unlock()
	for _, name := range names {
		if err := n.ps.SSubscribe(context.Background(), name); err != nil {
			n.logger.Debug("dlock: sharded resubscription failed", "channel", name, "err", err)
			return // the connection failed: the reader reconnects and comes back here
		}
	}
}

// wakeChannel wakes the waiters of one channel; confirm also marks the subscription as
// confirmed. The first confirmation wakes nobody: its waiters are still in Watch, and
// waking them would leave a false wake-up in a channel they may share with other watches.
// A confirmation after a reconnect wakes the waiters, who may have missed a message.
func (n *nodeConn) wakeChannel(name, payload string, confirm bool) {
	n.mu.Lock()
	defer n.mu.Unlock()
	st := n.channels[name]
	if st == nil {
		return
	}
	if confirm && !st.confirmed {
		st.confirmed = true
		close(st.ready)
		return
	}
	for w := range st.waiters {
		if confirm {
			w.wake()
		} else {
			w.message(name, payload)
		}
	}
}

func (n *nodeConn) wakeAll() {
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, st := range n.channels {
		for w := range st.waiters {
			w.wake()
		}
	}
}

func (n *nodeConn) close() {
	n.mu.Lock()
	n.closed = true
	for _, st := range n.channels {
		if st.idle != nil {
			st.idle.Stop()
		}
	}
	n.mu.Unlock()
	close(n.done)
	_ = n.ps.Close()
	n.wg.Wait()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}
