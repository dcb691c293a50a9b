package dlock_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// These tests show that a waiter hears a release by another program (a Redlock client of
// another library, redis-cli) on servers with their default configuration: no keyspace
// events. The key is bare (WithPrefix("")), held for 30 s by a plain SET NX PX; a waiter
// that woke at its expiry would take 30 s, one that was told a round trip. The bound,
// foreignWake, is generous for a loaded machine; the figures are logged, and measured by
// BenchmarkWakeOnForeignDelete.

const foreignWake = time.Second

// compareAndDelete is how Redlock clients of other libraries release a key.
const compareAndDelete = `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end return 0`

// A foreignRelease is how another program ends its hold of key, whose value is token.
type foreignRelease struct {
	name    string
	release func(ctx context.Context, rdb redis.Cmdable, key, token string) error
}

var foreignReleases = []foreignRelease{
	{"DEL", func(ctx context.Context, rdb redis.Cmdable, key, _ string) error {
		return rdb.Del(ctx, key).Err()
	}},
	{"UNLINK", func(ctx context.Context, rdb redis.Cmdable, key, _ string) error {
		return rdb.Unlink(ctx, key).Err()
	}},
	{"compare-and-delete", func(ctx context.Context, rdb redis.Cmdable, key, token string) error {
		return rdb.Eval(ctx, compareAndDelete, []string{key}, token).Err()
	}},
}

// foreignHold sets key to token on every node as another library would (SET NX PX).
func foreignHold(t testing.TB, ctx context.Context, nodes []redis.Cmdable, key, token string, ttl time.Duration) {
	t.Helper()
	for _, rdb := range nodes {
		if ok, err := rdb.SetNX(ctx, key, token, ttl).Result(); err != nil || !ok {
			t.Fatalf("SET %s NX PX: %v, %v", key, ok, err)
		}
	}
}

// wakeAfterRelease holds key on every node as another program, lets a Lock of c wait for
// it, releases it with release on every node and returns how long the Lock took after
// the release. The lease is unlocked. If stats is a client of the (first) node, it also
// checks that the waiter sends nothing while the key is held: it is told, not polling.
func wakeAfterRelease(t *testing.T, c *dlock.Client, nodes []redis.Cmdable, key string, release foreignRelease, stats *redis.Client) time.Duration {
	t.Helper()
	ctx := ctxTimeout(t, 20*time.Second)
	foreignHold(t, ctx, nodes, key, "other-library-token", longTTL)
	got := acquiredAt(t, ctx, c.Mutex(key, dlock.TTL(longTTL)).Lock)
	time.Sleep(200 * time.Millisecond) // let the waiter listen and settle
	if stats != nil {
		// A waiter that re-checks sends one attempt per 100ms at most; one that is told
		// sends none, or the last of its first two if it was slow to start.
		before := scriptCalls(t, stats)
		time.Sleep(500 * time.Millisecond)
		if calls := scriptCalls(t, stats) - before; calls > 2 {
			t.Errorf("the waiter sent %d attempts in 500ms while the key was held: it re-checks instead of being told", calls)
		}
	}
	released := time.Now()
	for _, rdb := range nodes {
		if err := release.release(ctx, rdb, key, "other-library-token"); err != nil {
			t.Fatalf("%s: %v", release.name, err)
		}
	}
	at := <-got
	if at.IsZero() {
		t.FailNow()
	}
	return at.Sub(released)
}

func TestWakeOnForeignRelease(t *testing.T) {
	_, rdb := standalone(t) // a stock server: no keyspace events
	c := newClient(t, rdb, dlock.WithPrefix(""))
	for _, r := range foreignReleases {
		t.Run(r.name, func(t *testing.T) {
			woke := wakeAfterRelease(t, c, []redis.Cmdable{rdb}, "bare-"+r.name, r, rdb)
			t.Logf("waiter acquired %v after a foreign %s", woke, r.name)
			if woke > foreignWake {
				t.Fatalf("waiter took %v after a foreign %s of a key with %v left", woke, r.name, longTTL)
			}
		})
	}
}

// TestWakeOnForeignOverwrite: a key overwritten by another holder wakes the waiter, which
// finds it held and waits on, and is woken again when that holder releases it, or at its
// shorter expiry rather than at the first holder's.
func TestWakeOnForeignOverwrite(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb, dlock.WithPrefix(""))
	ctx := ctxTimeout(t, 20*time.Second)

	foreignHold(t, ctx, []redis.Cmdable{rdb}, "overwritten", "first", longTTL)
	got := acquiredAt(t, ctx, c.Mutex("overwritten").Lock)
	time.Sleep(200 * time.Millisecond)
	before := scriptCalls(t, rdb)
	rdb.Set(ctx, "overwritten", "second", longTTL)
	waitFor(t, foreignWake, "the waiter to look again after the overwrite", func() bool {
		return scriptCalls(t, rdb) > before
	})
	select {
	case at := <-got:
		t.Fatalf("acquired at %v while the second holder held the key", at)
	case <-time.After(300 * time.Millisecond):
	}
	deleted := time.Now()
	rdb.Del(ctx, "overwritten")
	if woke := (<-got).Sub(deleted); woke > foreignWake {
		t.Fatalf("waiter took %v after the second holder's DEL", woke)
	} else {
		t.Logf("waiter acquired %v after the second holder's DEL", woke)
	}

	foreignHold(t, ctx, []redis.Cmdable{rdb}, "shortened", "first", longTTL)
	got = acquiredAt(t, ctx, c.Mutex("shortened").Lock)
	time.Sleep(200 * time.Millisecond)
	expiry := 500 * time.Millisecond
	set := time.Now()
	rdb.Set(ctx, "shortened", "second", expiry)
	took := (<-got).Sub(set)
	t.Logf("waiter acquired %v after the key was overwritten with a %v expiry", took, expiry)
	if took < expiry-50*time.Millisecond || took > expiry+foreignWake {
		t.Fatalf("waiter acquired %v after the overwrite, want about its %v expiry", took, expiry)
	}
}

// TestWakeOnForeignShortenedExpiry: where keyspace events are on (Kgx), a MultiMutex
// waiter, which neither tracks its keys nor refreshes a wait entry, hears another program that ends a
// hold by shortening the key's expiry (redis-cli PEXPIRE key 1, an overwrite with a short
// or past expiry). Redis publishes only "expire" for it ("set" is class $, not in Kgx);
// the key's "expired" comes only when Redis removes it, on access or when the active
// expiry cycle, which looks at about 20 volatile keys per 100ms, finds it: in a database
// of many volatile keys (dlock's own tombstones are volatile), minutes later. The waiter
// must not sleep until the first holder's 30s would have run out.
func TestWakeOnForeignShortenedExpiry(t *testing.T) {
	t.Parallel()
	shorten := []struct {
		name string
		do   func(ctx context.Context, rdb *redis.Client, key string) error
	}{
		{"PEXPIRE 1", func(ctx context.Context, rdb *redis.Client, key string) error {
			return rdb.PExpire(ctx, key, time.Millisecond).Err()
		}},
		{"SET PX 1", func(ctx context.Context, rdb *redis.Client, key string) error {
			return rdb.Set(ctx, key, "second", time.Millisecond).Err()
		}},
		{"SET PXAT past", func(ctx context.Context, rdb *redis.Client, key string) error {
			return rdb.Do(ctx, "SET", key, "second", "PXAT", 1000).Err()
		}},
		{"GETEX PX 1", func(ctx context.Context, rdb *redis.Client, key string) error {
			return rdb.GetEx(ctx, key, time.Millisecond).Err()
		}},
	}
	for _, s := range shorten {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.WithArgs("--notify-keyspace-events", "Kgx"))
			rdb := srv.Client(t)
			ctx := ctxTimeout(t, 20*time.Second)
			// Many volatile keys, as in a busy database: the active expiry cycle then takes
			// minutes to reach any one key.
			const fill = `for i = ARGV[1], ARGV[1] + 24999 do redis.call('SET', 'cache:' .. i, 'x', 'PX', 3600000) end return 1`
			for i := 0; i < 150000; i += 25000 {
				if err := rdb.Eval(ctx, fill, nil, i).Err(); err != nil {
					t.Fatal(err)
				}
			}
			c := newClient(t, rdb, dlock.WithPrefix(""))
			const key = "shortened"
			foreignHold(t, ctx, []redis.Cmdable{rdb}, key, "first", longTTL)
			got := acquiredAt(t, ctx, c.MultiMutex([]string{key}, dlock.TTL(longTTL)).Lock)
			time.Sleep(300 * time.Millisecond) // let the waiter listen and settle
			freed := time.Now()
			if err := s.do(ctx, rdb, key); err != nil {
				t.Fatal(err)
			}
			select {
			case at := <-got:
				if at.IsZero() {
					t.FailNow()
				}
				t.Logf("the waiter acquired %v after %s", at.Sub(freed), s.name)
			case <-time.After(3 * time.Second):
				t.Fatalf("the key was free 1ms after %s (Redis published only \"expire\"), and the waiter still slept 3s later: it wakes at the first holder's %v", s.name, longTTL)
			}
		})
	}
}

// TestWakeOnForeignReleaseWithoutClientCommand: where the ACL refuses CLIENT (but allows
// pub/sub), the waiter re-checks with a back-off of at most 100ms: it hears a foreign DEL
// within that, the log says why, and it does not spin meanwhile.
func TestWakeOnForeignReleaseWithoutClientCommand(t *testing.T) {
	srv, admin := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	if err := admin.Do(ctx, "ACL", "SETUSER", "u", "on", ">pw", "~*", "&*", "+@all", "-client").Err(); err != nil {
		t.Fatal(err)
	}
	opts := srv.Options()
	opts.Username, opts.Password = "u", "pw"
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	var log syncBuffer
	c := newClient(t, rdb, dlock.WithPrefix(""), dlock.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))

	woke := wakeAfterRelease(t, c, []redis.Cmdable{admin}, "no-client", foreignReleases[0], nil)
	t.Logf("waiter acquired %v after a foreign DEL, re-checking", woke)
	if woke > foreignWake {
		t.Fatalf("waiter took %v after a foreign DEL", woke)
	}
	if !strings.Contains(log.String(), "refuses CLIENT TRACKING") {
		t.Fatalf("no log line says that tracking is refused; the log:\n%s", log.String())
	}

	waitFor(t, foreignWake, "the lease's Unlock", func() bool { return admin.Exists(ctx, "no-client").Val() == 0 })
	foreignHold(t, ctx, []redis.Cmdable{admin}, "no-client", "other", longTTL)
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	before := scriptCalls(t, admin)
	if _, err := c.Mutex("no-client").Lock(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a held key = %v, want DeadlineExceeded", err)
	}
	// At most one re-check per 50ms (the back-off's floor at 100ms, with jitter) after
	// it grew, plus its first few.
	if calls := scriptCalls(t, admin) - before; calls > 60 {
		t.Fatalf("%d attempts in 2s on a held key: the re-check spins", calls)
	} else {
		t.Logf("%d attempts in 2s on a held key", calls)
	}
}

func TestWakeOnForeignReleaseCluster(t *testing.T) {
	cluster := redistest.StartCluster(t, 3)
	rdb := cluster.Client(t)
	c := newClient(t, rdb, dlock.WithPrefix(""))
	// Keys on different shards.
	for _, key := range []string{"bare-a", "bare-b", "bare-c"} {
		woke := wakeAfterRelease(t, c, []redis.Cmdable{rdb}, key, foreignReleases[0], nil)
		t.Logf("waiter acquired %v after a foreign DEL of %s", woke, key)
		if woke > foreignWake {
			t.Fatalf("waiter took %v after a foreign DEL of %s", woke, key)
		}
	}
}

// TestWakeOnForeignReleaseSentinel: through a Sentinel failover client, before and after
// a failover: the tracking connections follow the master (the pub/sub one is replaced
// when the new master does not know its id), so that after the first wait, which may
// re-check while they do, a waiter is told again.
func TestWakeOnForeignReleaseSentinel(t *testing.T) {
	d := redistest.StartSentinel(t)
	rdb := d.Client(t)
	c := newClient(t, rdb, dlock.WithPrefix(""))
	for _, wait := range []struct {
		key  string
		told bool // checked to send nothing while the key is held
	}{{"before-failover", true}, {"first-after-failover", false}, {"after-failover", true}} {
		if wait.key == "first-after-failover" {
			d.Failover(t)
		}
		var stats *redis.Client
		if wait.told {
			stats = d.Master.Client(t)
		}
		woke := wakeAfterRelease(t, c, []redis.Cmdable{rdb}, wait.key, foreignReleases[0], stats)
		t.Logf("waiter acquired %v after a foreign DEL, %s", woke, wait.key)
		if woke > foreignWake {
			t.Fatalf("waiter took %v after a foreign DEL, %s", woke, wait.key)
		}
	}
}

func TestWakeOnForeignReleaseQuorum(t *testing.T) {
	_, nodes, _ := quorumOf(t, 3)
	c := newQuorumClient(t, nodes, dlock.WithPrefix(""))
	cmdables := make([]redis.Cmdable, len(nodes))
	for i, n := range nodes {
		cmdables[i] = n
	}
	for _, r := range foreignReleases {
		t.Run(r.name, func(t *testing.T) {
			woke := wakeAfterRelease(t, c, cmdables, "bare-"+r.name, r, nodes[0].(*redis.Client))
			t.Logf("quorum waiter acquired %v after a foreign %s on every node", woke, r.name)
			if woke > foreignWake {
				t.Fatalf("quorum waiter took %v after a foreign %s", woke, r.name)
			}
		})
	}
}

// TestWakeOnDeleteByHandWithTurns: a Mutex that takes turns (a prefixed key on one
// server) does not track its key, which only dlock releases; a key deleted by hand is
// noticed when the waiter refreshes its place in the turns, within about a second.
func TestWakeOnDeleteByHandWithTurns(t *testing.T) {
	_, rdb := standalone(t)
	holder, waiter := newClient(t, rdb), newClient(t, rdb)
	ctx := ctxTimeout(t, 20*time.Second)
	l := mustLock(t, holder.Mutex("by-hand", dlock.TTL(longTTL)), ctx)
	defer l.Unlock(ctx)
	got := acquiredAt(t, ctx, waiter.Mutex("by-hand").Lock)
	time.Sleep(200 * time.Millisecond)
	deleted := time.Now()
	rdb.Del(ctx, "dlock:by-hand")
	woke := (<-got).Sub(deleted)
	t.Logf("waiter acquired %v after the key was deleted by hand", woke)
	if woke > time.Second+foreignWake {
		t.Fatalf("waiter took %v after the key was deleted by hand", woke)
	}
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(info, "cmdstat_client|tracking:") {
		t.Error("a Mutex that takes turns tracked its key")
	}
}

// TestUncontendedLockSendsNoTrackingCommand: only waiters track; an uncontended
// Lock+Unlock sends its two scripts and nothing else.
func TestUncontendedLockSendsNoTrackingCommand(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb, dlock.WithPrefix(""))
	ctx := ctxTimeout(t, 10*time.Second)
	// The first Lock also writes the Client's owner name (owner.lua reads its PTTL), once.
	if err := mustLock(t, c.Mutex("warm-up"), ctx).Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := rdb.ConfigResetStat(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	for range 20 {
		l := mustLock(t, c.Mutex("uncontended"), ctx)
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, cmd := range []string{"client|tracking", "client|id", "pttl", "subscribe"} {
		if strings.Contains(info, "cmdstat_"+cmd+":") {
			t.Errorf("uncontended Lock+Unlock sent %s", strings.ToUpper(cmd))
		}
	}
}

// BenchmarkWakeOnForeignDelete measures how long a waiter takes to acquire a bare key
// after another program DELs it (ns/op, and the median as median-ns): told by CLIENT
// TRACKING, and re-checking where an ACL refuses CLIENT.
func BenchmarkWakeOnForeignDelete(b *testing.B) {
	srv := redistest.Start(b)
	admin := srv.Client(b)
	ctx := context.Background()
	if err := admin.Do(ctx, "ACL", "SETUSER", "u", "on", ">pw", "~*", "&*", "+@all", "-client").Err(); err != nil {
		b.Fatal(err)
	}
	for _, mode := range []struct {
		name string
		user string
	}{{"tracking", ""}, {"fallback", "u"}} {
		b.Run(mode.name, func(b *testing.B) {
			opts := srv.Options()
			if mode.user != "" {
				opts.Username, opts.Password = mode.user, "pw"
			}
			rdb := redis.NewClient(opts)
			defer rdb.Close()
			c := dlock.New(rdb, dlock.WithPrefix(""))
			defer c.Close()
			m := c.Mutex("bench-wake", dlock.TTL(longTTL))
			var took []time.Duration
			b.ResetTimer()
			for range b.N {
				took = append(took, wakeOnce(b, ctx, admin, m))
			}
			slices.Sort(took)
			b.ReportMetric(float64(took[len(took)/2].Nanoseconds()), "median-ns")
		})
	}
}

// wakeOnce holds the key as another program, lets m wait for it and DELs it; it times
// only the DEL and the wake-up.
func wakeOnce(b *testing.B, ctx context.Context, admin *redis.Client, m *dlock.Mutex) time.Duration {
	b.StopTimer()
	foreignHold(b, ctx, []redis.Cmdable{admin}, "bench-wake", "other", longTTL)
	done := make(chan *dlock.Lease, 1)
	go func() {
		l, err := m.Lock(ctx)
		if err != nil {
			b.Error(err)
		}
		done <- l
	}()
	time.Sleep(150 * time.Millisecond) // the waiter settles; the fallback's back-off grows to its cap
	b.StartTimer()
	start := time.Now()
	admin.Del(ctx, "bench-wake")
	l := <-done
	took := time.Since(start)
	b.StopTimer()
	if l != nil {
		_ = l.Unlock(ctx)
	}
	b.StartTimer()
	return took
}

// syncBuffer is a bytes.Buffer safe for concurrent use: a logger's output.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
