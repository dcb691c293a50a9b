package dlock_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// fairOrder has a holder and six clients that start waiting 100ms apart, and checks that
// they are granted exactly in that order.
func fairOrder(t *testing.T, rdb redis.UniversalClient) {
	ctx := ctxTimeout(t, 60*time.Second)
	holder := newClient(t, rdb)
	l, err := holder.FairMutex("fair").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var order []int
	var tokens []uint64
	var wg sync.WaitGroup
	for i := range 6 {
		c := newClient(t, rdb) // one client each, as separate processes would be
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := c.FairMutex("fair").Lock(ctx)
			if err != nil {
				t.Error(err)
				return
			}
			mu.Lock()
			order = append(order, i)
			tokens = append(tokens, w.Token())
			mu.Unlock()
			time.Sleep(10 * time.Millisecond)
			_ = w.Unlock(ctx)
		}()
		time.Sleep(100 * time.Millisecond)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	for i, got := range order {
		if got != i {
			t.Fatalf("granted in order %v, want 0..5", order)
		}
		if i > 0 && tokens[i] <= tokens[i-1] {
			t.Fatalf("fencing tokens %v do not grow", tokens)
		}
	}
}

func TestFairMutexOrder(t *testing.T) {
	_, rdb := standalone(t)
	fairOrder(t, rdb)
}

func TestFairMutexOrderCluster(t *testing.T) {
	fairOrder(t, redistest.StartCluster(t, 3).Client(t))
}

func TestFairMutexWaiterGivesUp(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 30*time.Second)
	holder, quitter, next := newClient(t, rdb), newClient(t, rdb), newClient(t, rdb)
	l, err := holder.FairMutex("fair").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	quitCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	quitErr := make(chan error, 1)
	go func() { _, err := quitter.FairMutex("fair").Lock(quitCtx); quitErr <- err }()
	time.Sleep(50 * time.Millisecond)
	got := acquiredAt(t, ctx, next.FairMutex("fair").Lock)
	if err := <-quitErr; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the quitter's Lock = %v", err)
	}
	time.Sleep(100 * time.Millisecond)
	released := time.Now()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waited := (<-got).Sub(released)
	t.Logf("the next waiter got the lock %v after Unlock", waited)
	if waited > time.Second { // a queue entry left behind would cost its 3s lifetime
		t.Fatalf("a waiter that gave up delayed the next by %v", waited)
	}
}

func TestFairMutexKilledWaiterIsSkipped(t *testing.T) {
	srv, rdb := standalone(t)
	ctx := ctxTimeout(t, 60*time.Second)
	holder, next := newClient(t, rdb), newClient(t, rdb)
	l, err := holder.FairMutex("fair").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A waiter in another process joins the queue, then dies.
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"=1", workerMode+"=fairwait", workerAddrs+"="+srv.Addr)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 10*time.Second, "the worker to join the queue", func() bool {
		n, _ := rdb.LLen(ctx, "{dlock:fair}:queue").Result()
		return n == 1
	})
	_ = cmd.Process.Kill()
	_ = cmd.Wait()

	got := make(chan error, 1)
	go func() {
		w, err := next.FairMutex("fair").Lock(ctx)
		if err == nil {
			err = w.Unlock(ctx)
		}
		got <- err
	}()
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-got:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the dead waiter was never skipped")
	}
	t.Logf("the waiter behind a killed one got the lock %v after Unlock (bound: its 3s entry lifetime plus a refresh)", time.Since(start))
}

func TestFairMutexTryLockAndReentry(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 10*time.Second)
	a, b := newClient(t, rdb), newClient(t, rdb)
	l, err := a.FairMutex("fair").TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.FairMutex("fair").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held fair mutex = %v", err)
	}
	if n, _ := rdb.LLen(ctx, "{dlock:fair}:queue").Result(); n != 0 {
		t.Fatal("TryLock joined the queue")
	}
	in, err := a.FairMutex("fair").Lock(l.Context())
	if err != nil || in.Token() != l.Token() {
		t.Fatalf("re-entry: %v", err)
	}
	if err := a.FairMutex("fair").Do(l.Context(), func(context.Context) error { return nil }); err != nil {
		t.Fatalf("re-entrant Do: %v", err)
	}
	_ = in.Unlock(ctx)
	_ = l.Unlock(ctx)
}

func TestFairMutexRefusesQuorum(t *testing.T) {
	_, _, c := quorumOf(t, 3)
	_, err := c.FairMutex("fair").Lock(ctxTimeout(t, time.Second))
	if err == nil || !strings.Contains(err.Error(), "single Redis deployment") {
		t.Fatalf("FairMutex on a quorum = %v", err)
	}
}

// waitFor polls cond (a test's own observation, not the code under test) until it holds.
func waitFor(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A FairMutex TryLock whose grant lands after its ctx ended must not leave the lock held.
func TestFairTryLockTimeoutLeavesNothing(t *testing.T) {
	srv, rdb := standalone(t)
	p, via := behindProxy(t, srv, redis.Options{})
	p.SetLatency(t, 50*time.Millisecond)
	c := newClient(t, via)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.FairMutex("ft").TryLock(ctx); err == nil {
		t.Fatal("TryLock through 50ms of latency with a 20ms ctx succeeded")
	}
	waitFor(t, 5*time.Second, "the late grant to be undone", func() bool {
		return rdb.Exists(context.Background(), "dlock:ft").Val() == 0
	})
}
