package dlock_test

import (
	"context"
	"fmt"
	"os"
	"runtime/pprof"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/engine"
	"github.com/seed51c676c8/dlock/internal/faultproxy"
	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// standalone starts a redis-server for one test and returns a client for it.
func standalone(t *testing.T, opts ...redistest.Option) (*redistest.Server, *redis.Client) {
	t.Helper()
	srv := redistest.Start(t, opts...)
	return srv, srv.Client(t)
}

// behindProxy returns a TCP proxy to srv that delays or cuts on demand, and a Redis
// client with opts (its Addr set to the proxy's) that talks to srv through it, closed by
// the test's cleanup.
func behindProxy(t *testing.T, srv *redistest.Server, opts redis.Options) (*faultproxy.Proxy, *redis.Client) {
	t.Helper()
	p := faultproxy.New(t, srv.Addr)
	opts.Addr = p.Addr
	via := redis.NewClient(&opts)
	t.Cleanup(func() { _ = via.Close() })
	return p, via
}

// newClient returns a dlock Client that the test's cleanup closes (before the Redis
// clients it uses, which were registered earlier).
func newClient(t *testing.T, rdb redis.UniversalClient, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	c := dlock.New(rdb, opts...)
	t.Cleanup(func() { closeInTime(t, c) })
	return c
}

// newQuorumClient returns a dlock Client of the quorum of nodes that the test's cleanup
// closes, as newClient does.
func newQuorumClient(t *testing.T, nodes []redis.UniversalClient, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	c, err := dlock.NewQuorum(nodes, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { closeInTime(t, c) })
	return c
}

// closeTimeout bounds a Client's Close in a test's cleanup. Close is bounded by the drain
// (a second) and go-redis's read timeout, a few seconds even with a server paused.
const closeTimeout = 30 * time.Second

// closeInTime closes c, and fails the test with the stacks of dlock's goroutines if Close
// has not returned within closeTimeout. A goroutine of the Client stuck for good would
// otherwise hold the cleanup until the test binary's timeout, whose panic drops what the
// test reported before it (the failure that a mutation made, say).
func closeInTime(t *testing.T, c *dlock.Client) {
	done := make(chan struct{})
	go func() {
		_ = c.Close()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(closeTimeout):
		t.Errorf("Client.Close did not return within %v; dlock's goroutines:\n%s", closeTimeout, dlockStacks())
	}
}

// dlockStacks returns the stacks of the goroutines that run dlock's packages, goroutines
// of the same stack counted once; the tests' proxies and servers are left out.
func dlockStacks() string {
	var b strings.Builder
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	var out []string
	for g := range strings.SplitSeq(b.String(), "\n\n") {
		if strings.Contains(g, "/dlock/internal/") && !testMachinery(g) {
			out = append(out, g)
		}
	}
	return strings.Join(out, "\n\n")
}

// testMachinery reports whether a goroutine's stack runs the tests' proxies or servers.
func testMachinery(stack string) bool {
	for _, pkg := range []string{"faultproxy", "lateproxy", "redistest"} {
		if strings.Contains(stack, "/internal/"+pkg+".") {
			return true
		}
	}
	return false
}

// keysOf returns the Redis names of the lock called name under the default prefix. Tests
// ask internal/keyspace, which owns the key layout, rather than spelling keys by hand, so
// that a change of layout is made once and the tests follow it. It panics on a name that
// has no keys (empty, or a '}' outside a hash tag): a test's own names are constants.
func keysOf(name string) keyspace.Keys {
	k, err := keyspace.For(engine.DefaultPrefix, name)
	if err != nil {
		panic(err)
	}
	return k
}

func ctxTimeout(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

func mustLock(t *testing.T, m *dlock.Mutex, ctx context.Context) *dlock.Lease {
	t.Helper()
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock: %v", err)
	}
	return l
}

// scriptCalls returns how many scripts (EVAL and EVALSHA) the server has run: the number
// of dlock requests, since every dlock request is one script.
func scriptCalls(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatalf("INFO commandstats: %v", err)
	}
	total := 0
	for _, line := range strings.Split(info, "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		fields := strings.Split(strings.SplitN(line, ":", 2)[1], ",")
		for _, f := range fields {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				total += n
			}
		}
	}
	return total
}

// waitClosed fails the test unless ch is closed within d (a generous bound: a hang, not
// a speed, is what it detects).
func waitClosed(t *testing.T, ch <-chan struct{}, d time.Duration, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("%s: not within %v", what, d)
	}
}

// acquiredAt runs lock in the background and reports when it returned a lease (which it
// then unlocks); the zero time if it failed.
func acquiredAt(t *testing.T, ctx context.Context, lock func(context.Context) (*dlock.Lease, error)) <-chan time.Time {
	t.Helper()
	got := make(chan time.Time, 1)
	go func() {
		l, err := lock(ctx)
		if err != nil {
			t.Error(err)
			got <- time.Time{}
			return
		}
		got <- time.Now()
		_ = l.Unlock(ctx)
	}()
	return got
}

// defaultOwner is the owner name of a Client given none: "host:pid".
func defaultOwner(t *testing.T) string {
	t.Helper()
	host, err := os.Hostname()
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%s:%d", host, os.Getpid())
}

// named has c write its owner's label, which its first acquisition does (owner.lua, one
// script), before a test counts the scripts the server runs, so that the count is the
// lock's own. It returns c.
func named(t *testing.T, c *dlock.Client) *dlock.Client {
	t.Helper()
	ctx := ctxTimeout(t, 5*time.Second)
	if err := mustLock(t, c.Mutex("owner-written"), ctx).Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	return c
}
