package notify

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

const long = 10 * time.Second // bound for what must happen, on a slow machine

func newHub(t *testing.T, rdb redis.UniversalClient) *Hub {
	t.Helper()
	h := NewHub(rdb, slog.New(slog.DiscardHandler))
	t.Cleanup(h.Close)
	return h
}

func plain(names ...string) []Channel {
	out := make([]Channel, len(names))
	for i, n := range names {
		out[i] = Channel{Name: n}
	}
	return out
}

func watch(t *testing.T, h *Hub, route string, channels []Channel, wake chan struct{}) *Watch {
	t.Helper()
	wctx, cancel := context.WithTimeout(ctx, long)
	defer cancel()
	w, err := h.Watch(wctx, route, channels, wake)
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	return w
}

func woken(t *testing.T, wake chan struct{}, within time.Duration, what string) {
	t.Helper()
	select {
	case <-wake:
	case <-time.After(within):
		t.Fatalf("not woken within %v: %s", within, what)
	}
}

func notWoken(t *testing.T, wake chan struct{}, for_ time.Duration, what string) {
	t.Helper()
	select {
	case <-wake:
		t.Fatalf("woken: %s", what)
	case <-time.After(for_):
	}
}

func numSub(t *testing.T, rdb *redis.Client, channel string) int64 {
	t.Helper()
	n, err := rdb.PubSubNumSub(ctx, channel).Result()
	if err != nil {
		t.Fatal(err)
	}
	return n[channel]
}

func eventually(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(within)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: %s", within, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatchConfirmed: when Watch returns, the server has the subscription: a PUBLISH right
// after it reaches the watcher, every time.
func TestWatchConfirmed(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	h := newHub(t, srv.Client(t))
	wake := make(chan struct{}, 1)
	for i := range 100 {
		ch := "ch" + strconv.Itoa(i)
		w := watch(t, h, "", plain(ch), wake)
		select {
		case <-wake:
			t.Fatalf("round %d: woken by the subscription itself", i)
		default:
		}
		if n := rdb.Publish(ctx, ch, "released").Val(); n != 1 {
			t.Fatalf("round %d: PUBLISH right after Watch reached %d subscribers", i, n)
		}
		woken(t, wake, long, "publish right after Watch")
		w.Close()
	}
}

// TestWatchConcurrent: many goroutines watching the same fresh channels at once all return
// subscribed.
func TestWatchConcurrent(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	h := newHub(t, srv.Client(t))
	for round := range 10 {
		ch := "c" + strconv.Itoa(round)
		const n = 20
		wakes := make([]chan struct{}, n)
		errs := make(chan error, n)
		watches := make(chan *Watch, n)
		for i := range n {
			wakes[i] = make(chan struct{}, 1)
			go func() {
				wctx, cancel := context.WithTimeout(ctx, long)
				defer cancel()
				w, err := h.Watch(wctx, "", plain(ch, "other"+strconv.Itoa(i%3)), wakes[i])
				errs <- err
				watches <- w
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		rdb.Publish(ctx, ch, "x")
		for i := range n {
			woken(t, wakes[i], long, fmt.Sprintf("watcher %d of round %d", i, round))
		}
		for range n {
			(<-watches).Close()
		}
	}
}

// TestWakeOnAnyChannel: a watch of several channels wakes on each; a wake-up is kept until
// it is read, and several messages make one wake-up.
func TestWakeOnAnyChannel(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	h := newHub(t, srv.Client(t))
	wake := make(chan struct{}, 1)
	w := watch(t, h, "", plain("a", "b", "__keyspace@0__:k"), wake)
	defer w.Close()
	for _, ch := range []string{"a", "b", "__keyspace@0__:k", "b"} {
		rdb.Publish(ctx, ch, "x")
		woken(t, wake, long, "message on "+ch)
	}
	rdb.Publish(ctx, "unrelated", "x")
	notWoken(t, wake, 100*time.Millisecond, "message on an unwatched channel")

	for range 3 {
		rdb.Publish(ctx, "a", "x")
	}
	rdb.Publish(ctx, "unrelated", "x")
	time.Sleep(100 * time.Millisecond) // all three delivered
	woken(t, wake, long, "three messages")
	notWoken(t, wake, 100*time.Millisecond, "more than one wake-up kept")
}

// TestSharedWake: one wake channel shared by watches on two nodes (two hubs) wakes on either,
// and a new watch does not swallow a wake-up that another watch already delivered.
func TestSharedWake(t *testing.T) {
	t.Parallel()
	srvs := redistest.StartNodes(t, 2)
	r1, r2 := srvs[0].Client(t), srvs[1].Client(t)
	h1, h2 := newHub(t, srvs[0].Client(t)), newHub(t, srvs[1].Client(t))
	wake := make(chan struct{}, 1)

	w1 := watch(t, h1, "", plain("lock"), wake)
	defer w1.Close()
	r1.Publish(ctx, "lock", "released")
	eventually(t, long, "wake-up from node 1", func() bool { return len(wake) == 1 })
	// The release on node 1 is pending when the watch on node 2 starts.
	w2 := watch(t, h2, "", plain("lock"), wake)
	defer w2.Close()
	select {
	case <-wake:
	default:
		t.Fatal("the second Watch swallowed the wake-up of a release heard by the first")
	}

	r2.Publish(ctx, "lock", "released")
	woken(t, wake, long, "release on node 2")
	r1.Publish(ctx, "lock", "released")
	woken(t, wake, long, "release on node 1")
}

// TestWatchClose: a closed watch is not woken; other watches of the channel still are.
func TestWatchClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	h := newHub(t, srv.Client(t))
	w1wake, w2wake := make(chan struct{}, 1), make(chan struct{}, 1)
	w1 := watch(t, h, "", plain("ch"), w1wake)
	w2 := watch(t, h, "", plain("ch"), w2wake)
	w1.Close()
	w1.Close() // idempotent
	rdb.Publish(ctx, "ch", "x")
	woken(t, w2wake, long, "the remaining watch")
	notWoken(t, w1wake, 100*time.Millisecond, "a closed watch")
	w2.Close()
	rdb.Publish(ctx, "ch", "x")
	notWoken(t, w2wake, 100*time.Millisecond, "a closed watch")
}

// TestLinger: the subscription outlives its last watch by the linger time, so that the
// next watch needs no round trip, and is then dropped.
func TestLinger(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	h := newHub(t, srv.Client(t))
	h.linger = time.Second
	wake := make(chan struct{}, 1)

	w := watch(t, h, "", plain("ch"), wake)
	if n := numSub(t, rdb, "ch"); n != 1 {
		t.Fatalf("NUMSUB = %d while watched", n)
	}
	closed := time.Now()
	w.Close()
	if n := numSub(t, rdb, "ch"); n != 1 {
		t.Fatalf("NUMSUB = %d right after the last watch closed, want 1 (lingering)", n)
	}
	time.Sleep(200 * time.Millisecond)
	if n := numSub(t, rdb, "ch"); n != 1 && time.Since(closed) < h.linger {
		t.Fatalf("NUMSUB = %d %v after the last watch closed, want 1 (lingering)", n, time.Since(closed))
	}
	eventually(t, long, "unsubscribed after linger", func() bool { return numSub(t, rdb, "ch") == 0 })
	if e := time.Since(closed); e < h.linger {
		t.Fatalf("unsubscribed after %v, linger is %v", e, h.linger)
	}

	// A new watch subscribes again.
	w = watch(t, h, "", plain("ch"), wake)
	defer w.Close()
	if n := rdb.Publish(ctx, "ch", "x").Val(); n != 1 {
		t.Fatalf("PUBLISH reached %d subscribers after resubscribing", n)
	}
	woken(t, wake, long, "after resubscribing")
}

// TestOnceChannelDoesNotLinger: a channel only one wait listens on is dropped as soon as
// that wait ends, however long the linger.
func TestOnceChannelDoesNotLinger(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	h := newHub(t, srv.Client(t))
	h.linger = time.Hour
	wake := make(chan struct{}, 1)
	w := watch(t, h, "", []Channel{{Name: "mine", Once: true}, {Name: "shared"}}, wake)
	if n := numSub(t, rdb, "mine"); n != 1 {
		t.Fatalf("NUMSUB = %d while watched", n)
	}
	w.Close()
	eventually(t, long, "the once channel unsubscribed", func() bool { return numSub(t, rdb, "mine") == 0 })
	if n := numSub(t, rdb, "shared"); n != 1 {
		t.Fatalf("the shared channel: NUMSUB = %d, want 1 (lingering)", n)
	}
}

// TestLingerReuse: a watch that comes back within the linger time reuses the subscription,
// and keeps it past the first linger timer.
func TestLingerReuse(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	h := newHub(t, srv.Client(t))
	h.linger = 300 * time.Millisecond
	wake := make(chan struct{}, 1)
	w := watch(t, h, "", plain("ch"), wake)
	w.Close()
	w = watch(t, h, "", plain("ch"), wake)
	defer w.Close()
	time.Sleep(2 * h.linger)
	if n := rdb.Publish(ctx, "ch", "x").Val(); n != 1 {
		t.Fatalf("PUBLISH reached %d subscribers: the watched channel was dropped by an old linger timer", n)
	}
	woken(t, wake, long, "a reused subscription")
}

// TestLingerRace: the subscription ends while a new watch of the same channel starts. The
// new watch must end up subscribed, whatever the order the two commands reach the server.
func TestLingerRace(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	h := newHub(t, srv.Client(t))
	h.linger = 0 // unsubscribe as soon as the last watch leaves
	wake := make(chan struct{}, 1)
	for i := range 300 {
		w := watch(t, h, "", plain("ch"), wake)
		w.Close() // the unsubscription starts now, on a timer goroutine
		// Vary the head start of the unsubscription, so that the two commands race.
		for range i % 7 {
			runtime.Gosched()
		}
		w = watch(t, h, "", plain("ch"), wake)
		// Drain a possible re-confirmation wake-up, then check the subscription.
		select {
		case <-wake:
		default:
		}
		if n := rdb.Publish(ctx, "ch", "x").Val(); n != 1 {
			t.Fatalf("round %d: PUBLISH reached %d subscribers; the watch believes it is subscribed", i, n)
		}
		woken(t, wake, long, fmt.Sprintf("round %d", i))
		w.Close()
	}
}

// TestRestart: when the server dies, waiters are woken (they may have missed a release);
// when it is back on the same port, the hub subscribes again by itself, wakes the waiters
// again, and later releases are heard.
func TestRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	h := newHub(t, srv.Client(t))
	wake := make(chan struct{}, 1)
	w := watch(t, h, "", plain("a", "b"), wake)
	defer w.Close()

	srv.Kill(t)
	woken(t, wake, long, "connection lost")
	srv.Restart(t)
	// Wake-ups keep coming while the connection is down; the resubscription is confirmed
	// once the hub has reconnected.
	eventually(t, long, "resubscribed after restart", func() bool {
		n, err := rdb.PubSubNumSub(ctx, "a", "b").Result()
		return err == nil && n["a"] == 1 && n["b"] == 1
	})
	woken(t, wake, long, "resubscription")
	for _, ch := range []string{"a", "b"} {
		// Drain a wake-up of the reconnection that may still be pending.
		time.Sleep(50 * time.Millisecond)
		select {
		case <-wake:
		default:
		}
		if n := rdb.Publish(ctx, ch, "x").Val(); n != 1 {
			t.Fatalf("PUBLISH %s after restart reached %d subscribers", ch, n)
		}
		woken(t, wake, long, "release after restart on "+ch)
	}

	// A new channel after the restart works too.
	w2 := watch(t, h, "", plain("c"), wake)
	defer w2.Close()
	if n := rdb.Publish(ctx, "c", "x").Val(); n != 1 {
		t.Fatalf("PUBLISH c reached %d subscribers", n)
	}
	woken(t, wake, long, "release on a new channel after restart")
}

// TestConnectionKilled: a dropped pub/sub connection (CLIENT KILL) is re-established and
// every channel subscribed again, with a wake-up for the waiters.
func TestConnectionKilled(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	h := newHub(t, srv.Client(t))
	wake := make(chan struct{}, 1)
	var names []string
	for i := range 5 {
		names = append(names, "k"+strconv.Itoa(i))
	}
	w := watch(t, h, "", plain(names...), wake)
	defer w.Close()
	for range 3 {
		if err := rdb.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
			t.Fatal(err)
		}
		woken(t, wake, long, "connection killed")
		eventually(t, long, "resubscribed", func() bool {
			n, err := rdb.PubSubNumSub(ctx, names...).Result()
			if err != nil {
				return false
			}
			for _, name := range names {
				if n[name] != 1 {
					return false
				}
			}
			return true
		})
		time.Sleep(50 * time.Millisecond)
		select {
		case <-wake:
		default:
		}
		rdb.Publish(ctx, names[4], "x")
		woken(t, wake, long, "release after reconnection")
	}
}

// TestWatchContext: Watch gives up when ctx ends before the server confirms (a hung
// server), and the hub works once the server is back.
func TestWatchContext(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	h := newHub(t, srv.Client(t))
	wake := make(chan struct{}, 1)
	watch(t, h, "", plain("warm"), wake).Close() // connect first

	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := h.Watch(cctx, "", plain("x"), wake); !errors.Is(err, context.Canceled) {
		t.Fatalf("Watch with a cancelled ctx: %v", err)
	}

	srv.Pause(t)
	defer srv.Resume(t)
	dctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	start := time.Now()
	if _, err := h.Watch(dctx, "", plain("hung"), wake); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Watch on a paused server: %v, want DeadlineExceeded", err)
	}
	if e := time.Since(start); e > 5*time.Second {
		t.Fatalf("Watch took %v with a 200ms ctx", e)
	}
	srv.Resume(t)
	w := watch(t, h, "", plain("hung"), wake)
	defer w.Close()
	select { // a pending wake-up from the resumed confirmation may be there
	case <-wake:
	default:
	}
	if n := rdb.Publish(ctx, "hung", "x").Val(); n != 1 {
		t.Fatalf("PUBLISH reached %d subscribers", n)
	}
	woken(t, wake, long, "after the server resumed")
}

// TestCluster: sharded channels are subscribed with SSUBSCRIBE on the master that owns the
// routing key, one connection per master, and SPUBLISH wakes the waiters. After the
// connection is dropped, channels of several slots on one master are all subscribed again.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	rdb := c.Client(t)
	h := newHub(t, c.Client(t))
	wake := make(chan struct{}, 1)

	// Two keys per master, in different slots.
	byMaster := map[string][]string{}
	for i := 0; len(byMaster) < 3 || anyShort(byMaster); i++ {
		key := "dlock:lock" + strconv.Itoa(i)
		m, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		addr := m.Options().Addr
		if len(byMaster[addr]) < 2 {
			byMaster[addr] = append(byMaster[addr], key)
		}
	}
	var watches []*Watch
	for _, keys := range byMaster {
		for _, key := range keys {
			channel := "{" + key + "}:released"
			watches = append(watches, watch(t, h, key, []Channel{{Name: channel, Sharded: true}}, wake))
		}
	}
	defer func() {
		for _, w := range watches {
			w.Close()
		}
	}()
	h.mu.Lock()
	conns := len(h.nodes)
	h.mu.Unlock()
	if conns != 3 {
		t.Fatalf("%d node connections for 3 masters", conns)
	}

	servers := map[string]*redis.Client{}
	for _, s := range c.Servers {
		servers[s.Addr] = s.Client(t)
	}
	check := func(when string) {
		t.Helper()
		for addr, keys := range byMaster {
			for _, key := range keys {
				channel := "{" + key + "}:released"
				for other, cl := range servers {
					n := cl.PubSubShardNumSub(ctx, channel).Val()[channel]
					if want := map[bool]int64{true: 1, false: 0}[other == addr]; n != want {
						t.Fatalf("%s: SHARDNUMSUB %s on %s = %d, want %d (owner %s)", when, channel, other, n, want, addr)
					}
				}
				if err := rdb.SPublish(ctx, channel, "released").Err(); err != nil {
					t.Fatal(err)
				}
				woken(t, wake, long, when+": SPUBLISH "+channel)
			}
		}
	}
	check("subscribed")

	for addr, cl := range servers {
		if err := cl.ClientKillByFilter(ctx, "TYPE", "pubsub").Err(); err != nil {
			t.Fatalf("%s: %v", addr, err)
		}
	}
	eventually(t, long, "all sharded channels subscribed again", func() bool {
		for addr, keys := range byMaster {
			for _, key := range keys {
				channel := "{" + key + "}:released"
				if servers[addr].PubSubShardNumSub(ctx, channel).Val()[channel] != 1 {
					return false
				}
			}
		}
		return true
	})
	time.Sleep(50 * time.Millisecond)
	select {
	case <-wake:
	default:
	}
	check("after reconnection")
}

func anyShort(m map[string][]string) bool {
	for _, keys := range m {
		if len(keys) < 2 {
			return true
		}
	}
	return false
}

// TestHubClose: Close ends the readers (goleak), refuses new watches and is idempotent;
// closing watches after it is harmless.
func TestHubClose(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	sub := srv.Client(t)
	if err := sub.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	ignore := goleak.IgnoreCurrent()

	h := NewHub(sub, slog.New(slog.DiscardHandler))
	h.linger = time.Hour
	wake := make(chan struct{}, 1)
	w1 := watch(t, h, "", plain("a"), wake)
	w2 := watch(t, h, "", plain("b"), wake)
	w2.Close() // leaves a linger timer
	h.Close()
	h.Close()
	w1.Close()
	if _, err := h.Watch(ctx, "", plain("c"), wake); !errors.Is(err, ErrClosed) {
		t.Fatalf("Watch after Close: %v, want ErrClosed", err)
	}
	eventually(t, long, "unsubscribed on Close", func() bool { return numSub(t, rdb, "a") == 0 })
	if err := goleak.Find(ignore); err != nil {
		t.Fatal(err)
	}
	rdb.Publish(ctx, "a", "x")
	notWoken(t, wake, 50*time.Millisecond, "after Close")

	// A hub that never watched closes too.
	NewHub(sub, slog.New(slog.DiscardHandler)).Close()
}

// TestRoute: a message that Route defers (one that passes the lock to someone else) wakes
// the waiter only after the delay it returns; other messages wake it at once, and Route sees
// every payload; a watch closed with a deferred wake-up pending never fires it.
func TestRoute(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	h := newHub(t, rdb)
	seen := make(chan string, 16)
	ch := Channel{Name: "released", Route: func(payload string) time.Duration {
		seen <- payload
		if strings.HasPrefix(payload, "other") {
			return 500 * time.Millisecond
		}
		return 0
	}}
	wake := make(chan struct{}, 1)
	w := watch(t, h, "k", []Channel{ch}, wake)
	defer w.Close()

	rdb.Publish(ctx, "released", "other:1")
	notWoken(t, wake, 100*time.Millisecond, "a deferred message woke the waiter at once")
	woken(t, wake, long, "after the deferred message's delay")
	if got := <-seen; got != "other:1" {
		t.Fatalf("Route saw %q, want other:1", got)
	}

	for _, msg := range []string{"mine", "released", "left"} {
		rdb.Publish(ctx, "released", msg)
		woken(t, wake, long, msg)
		if got := <-seen; got != msg {
			t.Fatalf("Route saw %q, want %q", got, msg)
		}
	}

	// Two deferred messages in a row: one deferred wake-up, not two.
	rdb.Publish(ctx, "released", "other:a")
	rdb.Publish(ctx, "released", "other:b")
	woken(t, wake, long, "after the deferred messages' delay")
	notWoken(t, wake, time.Second, "a second deferred wake-up")

	// A watch that closes with a wake-up pending: the timer is stopped.
	wake2 := make(chan struct{}, 1)
	w2 := watch(t, h, "k", []Channel{ch}, wake2)
	rdb.Publish(ctx, "released", "other:c")
	eventually(t, long, "the deferred wake-up to be set", func() bool {
		w2.node.mu.Lock()
		defer w2.node.mu.Unlock()
		return w2.later != nil
	})
	w2.Close()
	notWoken(t, wake2, time.Second, "a closed watch's deferred wake-up")
}

// TestRouteDrops: a message that Route answers with a negative delay wakes no one, now or
// later, and leaves a deferred wake-up already pending alone; the others still wake.
func TestRouteDrops(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	h := newHub(t, rdb)
	ch := Channel{Name: "released", Route: func(payload string) time.Duration {
		switch payload {
		case "ignored":
			return -1
		case "later":
			return 300 * time.Millisecond
		}
		return 0
	}}
	wake := make(chan struct{}, 1)
	w := watch(t, h, "k", []Channel{ch}, wake)
	defer w.Close()

	rdb.Publish(ctx, "released", "ignored")
	notWoken(t, wake, 500*time.Millisecond, "a dropped message")
	rdb.Publish(ctx, "released", "later")
	rdb.Publish(ctx, "released", "ignored")
	notWoken(t, wake, 100*time.Millisecond, "a deferred message followed by a dropped one, at once")
	woken(t, wake, long, "after the deferred message's delay")
	rdb.Publish(ctx, "released", "now")
	woken(t, wake, long, "a message that wakes at once")
}

// TestWatchSubscribed: a watch without a round trip is made only where every channel is
// subscribed and confirmed already, and then hears what is published; it keeps a
// lingering channel subscribed.
func TestWatchSubscribed(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	h := newHub(t, rdb)
	h.linger = 200 * time.Millisecond
	wake := make(chan struct{}, 1)
	if w := h.WatchSubscribed(ctx, "k", plain("ws:a"), wake); w != nil {
		t.Fatal("a watch of a channel nobody subscribed to")
	}
	first := watch(t, h, "k", plain("ws:a"), make(chan struct{}, 1))
	if w := h.WatchSubscribed(ctx, "k", plain("ws:a", "ws:b"), wake); w != nil {
		t.Fatal("a watch of a channel not subscribed yet (ws:b)")
	}
	w := h.WatchSubscribed(ctx, "k", plain("ws:a"), wake)
	if w == nil {
		t.Fatal("no watch of a confirmed channel")
	}
	defer w.Close()
	first.Close()
	time.Sleep(2 * h.linger) // past the linger of first's channel: w keeps it
	if err := rdb.Publish(ctx, "ws:a", "x").Err(); err != nil {
		t.Fatal(err)
	}
	woken(t, wake, long, "a message on ws:a")
	if n := numSub(t, rdb, "ws:a"); n != 1 {
		t.Fatalf("ws:a has %d subscribers, want 1", n)
	}
}

// TestWatchSubscribedAtLingerEnd: a watch made without a round trip just as its channel's
// linger runs out either is refused (nil: the caller subscribes) or hears what is
// published next; it is never registered on a channel already unsubscribed.
func TestWatchSubscribedAtLingerEnd(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	h := newHub(t, rdb)
	h.linger = 20 * time.Millisecond
	made := 0
	for i := range 60 {
		first := watch(t, h, "k", plain("le:a"), make(chan struct{}, 1))
		first.Close()
		// Around the linger's end: from 5ms before it to 5ms after.
		time.Sleep(h.linger - 5*time.Millisecond + time.Duration(i%11)*time.Millisecond)
		wake := make(chan struct{}, 1)
		w := h.WatchSubscribed(ctx, "k", plain("le:a"), wake)
		if w == nil {
			continue
		}
		made++
		if err := rdb.Publish(ctx, "le:a", "x").Err(); err != nil {
			t.Fatal(err)
		}
		woken(t, wake, 2*time.Second, fmt.Sprintf("round %d: a message on a channel WatchSubscribed registered", i))
		w.Close()
	}
	t.Logf("%d of 60 watches made without a round trip", made)
	if made == 0 {
		// Half the rounds register before the linger ends; none doing so means the
		// test checked nothing.
		t.Fatal("no round registered a watch before the linger ended")
	}
}
