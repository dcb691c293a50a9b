package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// A FairMutex run: the waiters of one process queued right behind the one a release
// grants go with it, and the process hands the lock on among them without Redis.

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

// localHandOffs returns a Client option that counts the hand-offs within its process.
func localHandOffs() (dlock.Option, *atomic.Int32) {
	var n atomic.Int32
	return dlock.WithObserver(dlock.Observer{HandedOff: func(h dlock.HandOff) {
		if h.Local {
			n.Add(1)
		}
	}}), &n
}

// noFairKeys checks that the FairMutex "fair" left nothing in Redis but its fencing counter.
func noFairKeys(t *testing.T, rdb redis.UniversalClient) {
	t.Helper()
	noFairKeysOf(t, rdb, "fair")
}

// noFairKeysOf checks that the FairMutex name left nothing in Redis but its fencing counter.
func noFairKeysOf(t *testing.T, rdb redis.UniversalClient, name string) {
	t.Helper()
	ctx := context.Background()
	for _, k := range []string{"dlock:" + name, "{dlock:" + name + "}:queue", "{dlock:" + name + "}:queue:deadlines"} {
		if n, err := rdb.Exists(ctx, k).Result(); err != nil || n != 0 {
			t.Errorf("key %s left behind (%v)", k, err)
		}
	}
}

// TestFairRunHandsOffWithinProcessInOrder: the waiters of process A queued right behind
// the grantee take the lock from it without Redis, and a waiter of process B queued
// between them still comes in its turn.
func TestFairRunHandsOffWithinProcessInOrder(t *testing.T) {
	for _, tc := range []struct {
		name string
		rdb  func(t *testing.T) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T) redis.UniversalClient { _, rdb := standalone(t); return rdb }},
		{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.StartCluster(t, 3).Client(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) { fairRunInOrder(t, tc.rdb(t)) })
	}
}

func fairRunInOrder(t *testing.T, rdb redis.UniversalClient) {
	ctx := ctxTimeout(t, 60*time.Second)
	opt, local := localHandOffs()
	a, b := newClient(t, rdb, opt), newClient(t, rdb)
	got := queueFair(t, ctx, newClient(t, rdb), 20*time.Millisecond, []fairWaiter{
		{name: "a1", c: a}, {name: "a2", c: a}, {name: "a3", c: a}, {name: "b1", c: b}, {name: "a4", c: a}, {name: "a5", c: a},
	})
	grantedInOrder(t, got, "a1", "a2", "a3", "b1", "a4", "a5")
	if n := local.Load(); n != 3 { // a2, a3 from a1's run; a5 from a4's
		t.Errorf("%d hand-offs within process A, want 3", n)
	}
	noFairKeys(t, rdb)
}

// TestFairRunSkipsWaiterThatGaveUp: a member of a run that gives up is passed over.
func TestFairRunSkipsWaiterThatGaveUp(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 60*time.Second)
	opt, local := localHandOffs()
	a := newClient(t, rdb, opt)
	// a1 is granted with a2 and a3 in its run; a2 gives up while a1 holds.
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
	if n := local.Load(); n != 1 {
		t.Errorf("%d hand-offs within the process, want 1 (a1 to a3)", n)
	}
	noFairKeys(t, rdb)
}

// TestFairRunGoesBackToRedisInOrder: a member that locked a handle with other options
// gets a lease of its own making through Redis, and the rest of the run goes back to the
// head of the queue, ahead of the other process's waiter queued behind it.
func TestFairRunGoesBackToRedisInOrder(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 60*time.Second)
	opt, local := localHandOffs()
	a, b := newClient(t, rdb, opt), newClient(t, rdb)
	other := []dlock.LockOption{dlock.TTL(7 * time.Second)}
	got := queueFair(t, ctx, newClient(t, rdb), 20*time.Millisecond, []fairWaiter{
		{name: "a1", c: a}, {name: "a2", c: a, opts: other}, {name: "a3", c: a}, {name: "a4", c: a}, {name: "b1", c: b},
	})
	grantedInOrder(t, got, "a1", "a2", "a3", "a4", "b1")
	if n := local.Load(); n != 1 { // a3 to a4; a2 and a3 came through Redis
		t.Errorf("%d hand-offs within process A, want 1", n)
	}
	noFairKeys(t, rdb)
}

// TestFairRunAfterLostHold: when the hold of a run is lost (its key deleted), the waiters
// of the run go back to the head of the queue with their next attempt, in order, ahead of
// a waiter of another process queued behind them.
func TestFairRunAfterLostHold(t *testing.T) {
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
	first := <-a1 // granted with a2 and a3 in its run
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
