package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// FairMutex order: waiters of several processes, queued in a known order, are granted the
// lock in that order, whichever process they are in.

// fairWaiter is one Lock of a FairMutex in a scripted queue (queueFair).
type fairWaiter struct {
	name string
	c    *dlock.Client
	opts []dlock.LockOption
	ctx  context.Context // nil: the test's
}

// fairGrant is what a waiter of queueFair got.
type fairGrant struct {
	name  string
	token uint64
	err   error
}

// queueFair has a holder take the FairMutex "fair", queues the waiters 100ms apart (so
// that Redis has them in this order), then releases it. Each waiter holds for hold. It
// returns the grants in the order they happened, and the waiters' errors.
func queueFair(t *testing.T, ctx context.Context, holder *dlock.Client, hold time.Duration, waiters []fairWaiter) []fairGrant {
	t.Helper()
	l, err := holder.FairMutex("fair").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []fairGrant
	var wg sync.WaitGroup
	for _, w := range waiters {
		wctx := w.ctx
		if wctx == nil {
			wctx = ctx
		}
		wg.Go(func() {
			lease, err := w.c.FairMutex("fair", w.opts...).Lock(wctx)
			if err != nil {
				mu.Lock()
				got = append(got, fairGrant{name: w.name, err: err})
				mu.Unlock()
				return
			}
			mu.Lock()
			got = append(got, fairGrant{name: w.name, token: lease.Token()})
			mu.Unlock()
			time.Sleep(hold)
			if err := lease.Unlock(ctx); err != nil {
				t.Errorf("%s: unlock: %v", w.name, err)
			}
		})
		time.Sleep(100 * time.Millisecond)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	return got
}

// grantedInOrder checks that the waiters named in want got the lock in that order, with
// growing fencing tokens, and that no other grant happened.
func grantedInOrder(t *testing.T, got []fairGrant, want ...string) {
	t.Helper()
	var names []string
	var last uint64
	for _, g := range got {
		if g.err != nil {
			continue
		}
		names = append(names, g.name)
		if g.token <= last {
			t.Errorf("%s got fencing token %d after %d", g.name, g.token, last)
		}
		last = g.token
	}
	if fmt.Sprint(names) != fmt.Sprint(want) {
		t.Fatalf("granted in order %v, want %v", names, want)
	}
}

// noFairKeys checks that the FairMutex "fair" left nothing in Redis but its fencing counter.
func noFairKeys(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	noFairKeysOf(t, rdb, "fair")
}

// noFairKeysOf checks that the FairMutex name left nothing in Redis but its fencing counter
// and the tombstones of the waiters it served, which die within goneTTL.
func noFairKeysOf(t *testing.T, rdb redis.UniversalClient, name string) {
	t.Helper()
	ctx := context.Background()
	for _, k := range []string{keysOf(name).Lock, keysOf(name).Queue()} {
		if n, err := rdb.Exists(ctx, k).Result(); err != nil || n != 0 {
			t.Errorf("key %s left behind (%v)", k, err)
		}
	}
	onlyTombstones(t, rdb, keysOf(name).QueueDeadlines())
}

// goneTTL is how long a wait list remembers a waiter that was served or left (gone.lua).
const goneTTL = 10 * time.Second

// onlyTombstones checks that the deadlines key holds nothing but tombstones (gone.lua), and
// expires within goneTTL.
func onlyTombstones(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	ctx := context.Background()
	live, err := rdb.ZCount(ctx, key, "0", "+inf").Result()
	if err != nil || live != 0 {
		t.Errorf("%s: %d live entries left behind (%v)", key, live, err)
	}
	if ttl := rdb.PTTL(ctx, key).Val(); ttl > goneTTL || ttl == -time.Nanosecond {
		t.Errorf("%s: expires in %v, want within %v", key, ttl, goneTTL)
	}
}

// TestFairOrderWithinAndAcrossProcesses: waiters of process A queued one behind another,
// and a waiter of process B queued between them, are granted in request order.
func TestFairOrderWithinAndAcrossProcesses(t *testing.T) {
	for _, tc := range []struct {
		name string
		rdb  func(t *testing.T) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T) redis.UniversalClient { _, rdb := standalone(t); return rdb }},
		{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.StartCluster(t, 3).Client(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) { fairInOrder(t, tc.rdb(t)) })
	}
}

func fairInOrder(t *testing.T, rdb redis.UniversalClient) {
	ctx := ctxTimeout(t, 60*time.Second)
	a, b := newClient(t, rdb), newClient(t, rdb)
	got := queueFair(t, ctx, newClient(t, rdb), 20*time.Millisecond, []fairWaiter{
		{name: "a1", c: a}, {name: "a2", c: a}, {name: "a3", c: a}, {name: "b1", c: b}, {name: "a4", c: a}, {name: "a5", c: a},
	})
	grantedInOrder(t, got, "a1", "a2", "a3", "b1", "a4", "a5")
	noFairKeys(t, rdb)
}

// TestFairSkipsWaiterThatGaveUp: a waiter that gives up while queued is passed over.
func TestFairSkipsWaiterThatGaveUp(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 60*time.Second)
	a := newClient(t, rdb)
	// a1 is granted with a2 and a3 queued behind it; a2 gives up while a1 holds.
	quit, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
	defer cancel()
	got := queueFair(t, ctx, newClient(t, rdb), 400*time.Millisecond, []fairWaiter{
		{name: "a1", c: a}, {name: "a2", c: a, ctx: quit}, {name: "a3", c: a},
	})
	grantedInOrder(t, got, "a1", "a3")
	for _, g := range got {
		if g.name == "a2" && !errors.Is(g.err, context.DeadlineExceeded) {
			t.Errorf("a2's Lock = %v, want its deadline", g.err)
		}
	}
	noFairKeys(t, rdb)
}

// TestFairOrderAcrossHandlesOfOtherOptions: a waiter that locked a handle with other
// options keeps its place, and gets a lease of its own options.
func TestFairOrderAcrossHandlesOfOtherOptions(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 60*time.Second)
	a, b := newClient(t, rdb), newClient(t, rdb)
	other := []dlock.LockOption{dlock.TTL(7 * time.Second)}
	got := queueFair(t, ctx, newClient(t, rdb), 20*time.Millisecond, []fairWaiter{
		{name: "a1", c: a}, {name: "a2", c: a, opts: other}, {name: "a3", c: a}, {name: "a4", c: a}, {name: "b1", c: b},
	})
	grantedInOrder(t, got, "a1", "a2", "a3", "a4", "b1")
	noFairKeys(t, rdb)
}

// TestFairOrderAfterLostHold: when a holder's key is deleted under it, the waiters queued
// behind it take the lock in order, a waiter of another process last as it came.
func TestFairOrderAfterLostHold(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 60*time.Second)
	a, b, holder := newClient(t, rdb), newClient(t, rdb), newClient(t, rdb)
	l, err := holder.FairMutex("fair").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	order := make(chan string, 4)
	lockAs := func(name string, c *dlock.Client) <-chan *dlock.Lease {
		got := make(chan *dlock.Lease, 1)
		go func() {
			lease, err := c.FairMutex("fair").Lock(ctx)
			if err != nil {
				t.Errorf("%s: %v", name, err)
				close(got)
				return
			}
			order <- name
			got <- lease
		}()
		time.Sleep(100 * time.Millisecond)
		return got
	}
	a1, a2, a3, b1 := lockAs("a1", a), lockAs("a2", a), lockAs("a3", a), lockAs("b1", b)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	first := <-a1
	if err := rdb.Del(ctx, "dlock:fair").Err(); err != nil {
		t.Fatal(err)
	}
	second := <-a2
	if err := first.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("a1's Unlock after its key was deleted = %v, want ErrNotHeld", err)
	}
	for _, next := range []<-chan *dlock.Lease{a3, b1} {
		if err := second.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		second = <-next
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	close(order)
	var names []string
	for n := range order {
		names = append(names, n)
	}
	if fmt.Sprint(names) != "[a1 a2 a3 b1]" {
		t.Fatalf("granted in order %v, want [a1 a2 a3 b1]", names)
	}
	noFairKeys(t, rdb)
}
