package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Tracking: wake-ups on a write to a key by anyone (DEL, UNLINK, SET, a script, expiry),
// through CLIENT TRACKING (Redis 6+), which needs no server configuration.
//
// Per node, a tracker keeps two connections. A pub/sub connection subscribed to
// InvalidateChannel, which speaks RESP2 whatever the node's client does: a RESP3
// connection gets invalidations as push messages, which go-redis's pub/sub does not
// deliver. And a tracked connection, taken from the node's client (so that its hooks see
// the commands; EphemeralConn, so that its tracking state never goes back to the pool),
// with CLIENT TRACKING on REDIRECT <the pub/sub connection's id>. A key read on the
// tracked connection is remembered by the server, which sends the key's name the next
// time anyone writes it, and then forgets it: one read, one message. Key.Arm reads again.
//
// Register, then recheck: Arm's read is both the registration and the look at the key,
// in one command, so a write before it shows in its reply and a write after it is told.
//
// Registrations are lost when either connection is: the reader wakes every key and
// counts a new epoch, after which every Key reads again. Nothing is lost silently except
// what pub/sub loses anyway (a connection that dies without an error until the next
// ping); waiters bound that by the holder's expiry.

// InvalidateChannel is where the server sends the names of tracked keys that were written.
const InvalidateChannel = "__redis__:invalidate"

// ErrTrackingRefused is returned by Track and Key.Arm when the node cannot track keys: the
// server is older than Redis 6, the ACL user may not run CLIENT TRACKING and CLIENT ID or
// subscribe to InvalidateChannel, or the client is neither a *redis.Client nor a
// *redis.ClusterClient. It wraps the server's error, if there was one, and lasts for the
// life of the Hub.
var ErrTrackingRefused = errors.New("dlock: the server refuses CLIENT TRACKING")

// tracker is the tracking of one node.
type tracker struct {
	node   *redis.Client // the node's client; the tracked connection is one of its
	sub    *redis.Client // a RESP2 copy of node's options that carries ps only
	logger *slog.Logger
	idle   time.Duration // idlePing, except in tests
	done   chan struct{} // closed by close
	ready  chan struct{} // closed once the server has confirmed the first subscription
	wg     sync.WaitGroup

	// subID is the CLIENT ID of ps's current connection, set as it connects (before it
	// subscribes); 0 before, -1 when CLIENT ID was refused (subErr says why).
	subID  atomic.Int64
	subErr atomic.Pointer[error]

	// conn holds the tracked connection while no one uses it: taking it from the channel
	// is a lock that a ctx can give up on, since a read may hang with its server.
	conn chan *trackedConn

	// psMu guards ps, which the reader replaces after reconnect closed it (replacing):
	// after a failover, the pub/sub connection may stay with the old master while the
	// tracked one follows the new master, which then refuses to redirect to an id it does
	// not know.
	psMu      sync.Mutex
	ps        *redis.PubSub
	replacing bool

	mu      sync.Mutex
	keys    map[string]map[*Key]struct{} // guarded by mu: the registered keys
	epoch   uint64                       // guarded by mu: bumped when every registration may be lost
	refused error                        // guarded by mu: why tracking is refused, for good
	gone    chan struct{}                // closed when refused is set, once
	started bool                         // guarded by mu: the reader runs
}

// trackedConn is the tracked connection (nil until first used, or after it failed) and
// the id it redirects invalidations to.
type trackedConn struct {
	c        *redis.Conn
	redirect int64
}

func newTracker(node *redis.Client, logger *slog.Logger, idle time.Duration) *tracker {
	tr := &tracker{
		node:   node,
		logger: logger,
		idle:   idle,
		done:   make(chan struct{}),
		ready:  make(chan struct{}),
		conn:   make(chan *trackedConn, 1),
		keys:   make(map[string]map[*Key]struct{}),
		gone:   make(chan struct{}),
	}
	tr.conn <- &trackedConn{}
	tr.sub = redis.NewClient(tr.subOptions())
	return tr
}

// subOptions copies the node's options for the pub/sub connection: the same server,
// credentials, TLS and dialer, with RESP2, a pool of one, and nothing that needs RESP3.
// Each connection records its CLIENT ID after the node's own OnConnect, if any.
func (tr *tracker) subOptions() *redis.Options {
	opt := *tr.node.Options()
	opt.Protocol = 2
	opt.PoolSize, opt.MinIdleConns, opt.MaxIdleConns, opt.MaxActiveConns = 1, 0, 0, 0
	opt.PushNotificationProcessor = nil
	opt.MaintNotificationsConfig = nil
	opt.ClientSideCacheConfig, opt.ClientSideCache = nil, nil
	opt.AutoPipelineOptions = nil
	onConnect := opt.OnConnect
	opt.OnConnect = func(ctx context.Context, cn *redis.Conn) error {
		if onConnect != nil {
			if err := onConnect(ctx, cn); err != nil {
				return err
			}
		}
		id, err := cn.ClientID(ctx).Result()
		var rerr redis.Error
		switch {
		case err == nil:
			tr.subID.Store(id)
		case errors.As(err, &rerr):
			tr.subErr.Store(&err)
			tr.subID.Store(-1)
		default:
			return err // the connection failed: go-redis dials again
		}
		return nil
	}
	return &opt
}

// start subscribes and starts the reader, once.
func (tr *tracker) start() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.started {
		return
	}
	tr.started = true
	tr.wg.Add(1)
	go tr.receive()
}

// receive subscribes, then delivers invalidations until close. A broken connection is
// re-established by go-redis on the next Receive, which also subscribes again.
func (tr *tracker) receive() {
	defer tr.wg.Done()
	ctx := context.Background()
	ps := tr.subscribe()
	backoff := 10 * time.Millisecond
	for ps != nil {
		msg, err := ps.ReceiveTimeout(ctx, tr.idle)
		select {
		case <-tr.done:
			return
		default:
		}
		if err != nil {
			if next := tr.replaced(); next != nil {
				// reconnect closed ps: the new connection's confirmation starts a new
				// epoch, and the next read points at its id.
				ps = next
				continue
			}
			if tr.failed(ctx, ps, err) {
				select {
				case <-time.After(backoff):
				case <-tr.done:
					return
				}
				backoff = min(2*backoff, time.Second)
			}
			continue
		}
		backoff = 10 * time.Millisecond
		switch m := msg.(type) {
		case *redis.Message:
			if m.Channel == InvalidateChannel {
				tr.invalidated(m.PayloadSlice)
			}
		case *redis.Subscription:
			if m.Kind == "subscribe" {
				tr.subscribed()
			}
		}
	}
}

// subscribe makes a pub/sub connection subscribed to InvalidateChannel; nil after close.
func (tr *tracker) subscribe() *redis.PubSub {
	tr.psMu.Lock()
	select {
	case <-tr.done:
		tr.psMu.Unlock()
		return nil
	default:
	}
	ps := tr.sub.Subscribe(context.Background()) // connects at the first channel
	tr.ps = ps
	tr.psMu.Unlock()
	// Outside psMu, which reconnect takes: this dials. If it fails, Receive retries; if
	// close closed ps meanwhile, Receive fails and the reader sees done.
	if err := ps.Subscribe(context.Background(), InvalidateChannel); err != nil {
		tr.logger.Debug("dlock: tracking subscription failed; retrying", "err", err)
	}
	return ps
}

// replaced returns the reader's new pub/sub connection after reconnect closed its last,
// or nil if it did not.
func (tr *tracker) replaced() *redis.PubSub {
	tr.psMu.Lock()
	replacing := tr.replacing
	tr.replacing = false
	tr.psMu.Unlock()
	if !replacing {
		return nil
	}
	return tr.subscribe()
}

// reconnect makes the reader replace its pub/sub connection, which was given id: the
// tracked connection's server does not know id (see psMu). It does nothing if the
// connection changed since, or is being replaced.
func (tr *tracker) reconnect(id int64) {
	tr.psMu.Lock()
	defer tr.psMu.Unlock()
	if tr.replacing || tr.ps == nil || tr.subID.Load() != id {
		return
	}
	tr.replacing = true
	_ = tr.ps.Close() // ends the reader's Receive
}

// failed handles an error of ps's Receive and reports whether the reader should back off.
func (tr *tracker) failed(ctx context.Context, ps *redis.PubSub, err error) (backOff bool) {
	var rerr redis.Error
	switch {
	case isTimeout(err):
		_ = ps.Ping(ctx) // a dead connection then fails the next Receive
		tr.ping(ctx)
		return false
	case strings.HasPrefix(err.Error(), "redis: unsupported pubsub message payload"):
		// An invalidation with no keys (a null payload): the server flushed the database
		// or its tracking table, which invalidates every key.
		tr.lost()
		return false
	case errors.As(err, &rerr) && strings.HasPrefix(err.Error(), "NOPERM"):
		// The subscription itself was refused (an ACL without the channel).
		tr.refuse(err)
		return true
	}
	tr.logger.Debug("dlock: tracking connection failed; reconnecting", "err", err)
	tr.lost()
	return true
}

// idlePing is how long the connections may stay idle before the reader pings them: a
// server with an idle timeout (the timeout setting, which pub/sub connections are exempt
// from) would otherwise close the tracked connection and, with it, every registration,
// without telling anyone.
const idlePing = 30 * time.Second

// ping pings the tracked connection, unless a read is using it or it is not connected,
// and drops it if it failed.
func (tr *tracker) ping(ctx context.Context) {
	var tc *trackedConn
	select {
	case tc = <-tr.conn:
	default:
		return
	}
	defer tr.giveBack(tc)
	if tc.c == nil {
		return
	}
	var rerr redis.Error
	if err := tc.c.Ping(ctx).Err(); err != nil && !errors.As(err, &rerr) {
		tr.dropConn(tc)
	}
}

// subscribed handles a confirmation of the subscription: the first makes the tracker
// ready; a later one follows a reconnect, during which invalidations may have been lost.
func (tr *tracker) subscribed() {
	select {
	case <-tr.ready:
		tr.lost()
	default:
		close(tr.ready)
	}
}

// invalidated wakes the registrations of keys, which the server no longer tracks.
func (tr *tracker) invalidated(keys []string) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	for _, key := range keys {
		for k := range tr.keys[key] {
			k.armed = false
			k.wake()
		}
	}
}

// lost wakes every registration and starts a new epoch: whatever the server tracked for
// this tracker may be gone.
func (tr *tracker) lost() {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	tr.epoch++
	for _, ks := range tr.keys {
		for k := range ks {
			k.wake()
		}
	}
}

// refuse records that the node refuses tracking, for good, and wakes every registration.
func (tr *tracker) refuse(err error) {
	tr.mu.Lock()
	defer tr.mu.Unlock()
	if tr.refused != nil {
		return
	}
	tr.refused = fmt.Errorf("%w: %w", ErrTrackingRefused, err)
	close(tr.gone)
	tr.logger.Warn("dlock: the server refuses CLIENT TRACKING: waiters re-check a held lock with a bounded back-off instead of hearing releases by other programs (grant the user +client|tracking, +client|id and the channel "+InvalidateChannel+", on Redis 6 or later)",
		"node", tr.node.Options().Addr, "err", err)
	for _, ks := range tr.keys {
		for k := range ks {
			k.wake()
		}
	}
}

// read reads key on the tracked connection, which registers it, and reports whether it
// exists. ctx bounds the waits for the subscription and the connection; the read itself
// is bounded by the client's read timeout.
func (tr *tracker) read(ctx context.Context, key string) (exists bool, err error) {
	select {
	case <-tr.ready:
	case <-tr.gone:
		return false, ErrTrackingRefused // Arm returns tr.refused
	case <-ctx.Done():
		return false, ctx.Err()
	case <-tr.done:
		return false, ErrClosed
	}
	var tc *trackedConn
	select {
	case tc = <-tr.conn:
	case <-ctx.Done():
		return false, ctx.Err()
	case <-tr.done:
		return false, ErrClosed
	}
	defer tr.giveBack(tc)
	id := tr.subID.Load()
	if id < 0 {
		err := *tr.subErr.Load()
		tr.refuse(err)
		return false, err
	}
	if tc.c == nil {
		tc.c, tc.redirect = tr.node.EphemeralConn(), 0
	}
	return tr.readOn(ctx, tc, id, key)
}

// giveBack returns the tracked connection to the channel, or closes it if the tracker
// closed meanwhile: close takes only what is in the channel when it runs.
func (tr *tracker) giveBack(tc *trackedConn) {
	select {
	case <-tr.done:
		if tc.c != nil {
			_ = tc.c.Close()
			tc.c = nil
		}
	default:
	}
	tr.conn <- tc
}

// readOn is read on the connection tc, pointing its invalidations at id first if needed.
func (tr *tracker) readOn(ctx context.Context, tc *trackedConn, id int64, key string) (bool, error) {
	var on *redis.Cmd
	var pttl *redis.DurationCmd
	_, _ = tc.c.Pipelined(ctx, func(p redis.Pipeliner) error {
		if tc.redirect != id {
			on = p.Do(ctx, "CLIENT", "TRACKING", "on", "REDIRECT", id)
		}
		pttl = p.PTTL(ctx, key)
		return nil
	})
	if on != nil {
		if err := on.Err(); err != nil {
			return false, tr.trackingFailed(tc, id, err)
		}
		if tc.redirect == 0 {
			tr.logger.Debug("dlock: waiters hear writes by other programs through CLIENT TRACKING", "node", tr.node.Options().Addr)
		}
		tc.redirect = id
	}
	ttl, err := pttl.Result()
	if err != nil {
		var rerr redis.Error
		if !errors.As(err, &rerr) {
			tr.dropConn(tc)
		}
		return false, err
	}
	return ttl != -2, nil // -2: no such key
}

// trackingFailed handles the error of CLIENT TRACKING and returns what read returns.
func (tr *tracker) trackingFailed(tc *trackedConn, id int64, err error) error {
	var rerr redis.Error
	switch {
	case !errors.As(err, &rerr):
		tr.dropConn(tc)
	case strings.Contains(err.Error(), "redirect to does not exist"):
		// The pub/sub connection is on another server (a failover moved the tracked one
		// to the new master), or it reconnected after id was read: in either case a new
		// connection's confirmation starts a new epoch, and the next read points at it.
		tr.reconnect(id)
	default:
		tr.refuse(err)
		return fmt.Errorf("%w: %w", ErrTrackingRefused, err)
	}
	return err
}

// dropConn closes the tracked connection after it failed: what it registered is gone.
func (tr *tracker) dropConn(tc *trackedConn) {
	_ = tc.c.Close()
	tc.c, tc.redirect = nil, 0
	tr.lost()
}

func (tr *tracker) close() {
	close(tr.done)
	tr.psMu.Lock()
	if tr.ps != nil {
		_ = tr.ps.Close()
	}
	tr.psMu.Unlock()
	tr.wg.Wait()
	_ = tr.sub.Close()
	// A read still under way keeps the connection until its reply or its read timeout,
	// and then closes it (giveBack).
	select {
	case tc := <-tr.conn:
		if tc.c != nil {
			_ = tc.c.Close()
		}
	default:
	}
}

// Key is one waiter's registration of a key on one node (Hub.Track).
type Key struct {
	tr   *tracker
	key  string
	c    chan struct{} // the waiter's; a wake-up is kept until the waiter reads it
	once sync.Once

	// Guarded by tr.mu: armed says the server tracks key for this Key, as far as it
	// knows, since the read made in epoch.
	armed bool
	epoch uint64
}

// wake sends on the waiter's channel without blocking.
func (k *Key) wake() {
	select {
	case k.c <- struct{}{}:
	default:
	}
}

// Arm makes sure that the next write to the key by anyone wakes the waiter. It reads the
// key, which registers it, and reports whether that read found it gone: a write the reply
// does not show is told. While the Key is armed (no write heard since it last read, no
// connection lost) it sends nothing and reports false: a key gone then, and there now,
// was written since, which will be told. ctx bounds the waits for the connections; the
// read is bounded by the client's read timeout, so call it from a goroutine that a
// waiter need not wait for. It returns an error that wraps ErrTrackingRefused when the
// node refuses tracking, for good, and another error when this read failed: the key is
// then not armed.
func (k *Key) Arm(ctx context.Context) (gone bool, err error) {
	tr := k.tr
	select {
	case <-tr.done:
		return false, ErrClosed
	default:
	}
	tr.mu.Lock()
	if tr.refused != nil {
		tr.mu.Unlock()
		return false, tr.refused
	}
	if k.armed && k.epoch == tr.epoch {
		tr.mu.Unlock()
		return false, nil
	}
	// Armed before the read: a write heard while it is out disarms the Key again.
	k.armed, k.epoch = true, tr.epoch
	tr.mu.Unlock()

	exists, err := tr.read(ctx, k.key)
	if err != nil {
		tr.mu.Lock()
		defer tr.mu.Unlock()
		k.armed = false
		if tr.refused != nil {
			return false, tr.refused
		}
		return false, err
	}
	return !exists, nil
}

// Close ends the registration. The server may still send the key once; it is ignored.
func (k *Key) Close() {
	k.once.Do(func() {
		tr := k.tr
		tr.mu.Lock()
		defer tr.mu.Unlock()
		if ks := tr.keys[k.key]; ks != nil {
			delete(ks, k)
			if len(ks) == 0 {
				delete(tr.keys, k.key)
			}
		}
	})
}
