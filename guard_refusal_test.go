package dlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// sentNothing fails the test if Guard sent the commands: key must not exist.
func sentNothing(t *testing.T, rdb redis.UniversalClient, key string) {
	t.Helper()
	if n := rdb.Exists(context.Background(), key).Val(); n != 0 {
		t.Fatalf("%s exists: the refused commands were sent", key)
	}
}

// guardRefused runs fn under lease and fails the test unless Guard's error contains want
// and the first key fn writes, lease.Key("first"), was not written.
func guardRefused(t *testing.T, rdb redis.UniversalClient, lease *dlock.Lease, want string, fn func(ctx context.Context, p redis.Pipeliner)) {
	t.Helper()
	ctx := ctxTimeout(t, 10*time.Second)
	_, err := lease.Guard(ctx, func(p redis.Pipeliner) error {
		p.Set(ctx, lease.Key("first"), 1, 0)
		fn(ctx, p)
		return nil
	})
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("Guard: %v, want an error saying %q", err, want)
	}
	sentNothing(t, rdb, lease.Key("first"))
}

// TestGuardClusterSlots: on a Cluster, a key outside the lock's slot is refused before
// anything is sent, whether its place is in COMMAND INFO or only COMMAND GETKEYS knows
// it; keys named by Key or with the lock's hash tag are written; a MultiMutex whose
// names span slots is refused.
func TestGuardClusterSlots(t *testing.T) {
	rdb := redistest.StartCluster(t, 3).Client(t)
	ctx := ctxTimeout(t, 20*time.Second)
	c := newClient(t, rdb)
	lease, err := c.Mutex("{sale}").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, bad := range []struct {
		name string
		fn   func(ctx context.Context, p redis.Pipeliner)
	}{
		{"incr", func(ctx context.Context, p redis.Pipeliner) { p.Incr(ctx, "elsewhere") }},
		{"mset", func(ctx context.Context, p redis.Pipeliner) { p.MSet(ctx, "{sale}/a", 1, "elsewhere", 2) }},
		{"zunionstore", func(ctx context.Context, p redis.Pipeliner) {
			p.ZUnionStore(ctx, "{sale}/u", &redis.ZStore{Keys: []string{"{sale}/z", "elsewhere"}})
		}},
		{"xgroup create", func(ctx context.Context, p redis.Pipeliner) { p.XGroupCreateMkStream(ctx, "elsewhere", "g", "$") }},
	} {
		t.Run(bad.name, func(t *testing.T) { guardRefused(t, rdb, lease, `touches key "elsewhere"`, bad.fn) })
	}
	cmds, err := lease.Guard(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, lease.Key("n"))
		p.MSet(ctx, "{sale}:a", 1, "x{sale}", 2)
		p.ZUnionStore(ctx, "{sale}/u", &redis.ZStore{Keys: []string{"{sale}/z"}})
		return nil
	})
	if err != nil || cmds[0].(*redis.IntCmd).Val() != 1 {
		t.Fatalf("keys in the lock's slot: %v %v", cmds, err)
	}
	multi, err := c.MultiMutex([]string{"a", "b", "c", "d"}).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer multi.Unlock(ctx)
	guardRefused(t, rdb, multi, "names span", func(context.Context, redis.Pipeliner) {})
}

// TestGuardRefusals: what Guard refuses before anything is sent, and what fn decides.
func TestGuardRefusals(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	c := newClient(t, rdb)
	lease := mustLock(t, c.Mutex("guard-refusals"), ctx)
	t.Run("exec inside fn", func(t *testing.T) {
		_, err := lease.Guard(ctx, func(p redis.Pipeliner) error {
			p.Set(ctx, lease.Key("first"), 1, 0)
			_, err := p.Exec(ctx)
			return err
		})
		if !errors.Is(err, errExecInGuard(t, lease)) {
			t.Fatalf("Exec inside fn: %v", err)
		}
		sentNothing(t, rdb, lease.Key("first"))
	})
	t.Run("fn fails", func(t *testing.T) {
		boom := errors.New("boom")
		if _, err := lease.Guard(ctx, func(p redis.Pipeliner) error { p.Set(ctx, lease.Key("first"), 1, 0); return boom }); err != boom {
			t.Fatalf("fn's error: %v", err)
		}
		sentNothing(t, rdb, lease.Key("first"))
	})
	t.Run("untyped reply", func(t *testing.T) {
		guardRefused(t, rdb, lease, "cannot type", func(ctx context.Context, p redis.Pipeliner) { p.XRange(ctx, lease.Key("s"), "-", "+") })
	})
	t.Run("timestamp", func(t *testing.T) {
		ts, err := c.TimestampMutex("guard-ts").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		defer ts.Unlock(ctx)
		guardRefused(t, rdb, ts, "TimestampMutex", func(context.Context, redis.Pipeliner) {})
	})
}

// errExecInGuard is the error of Exec inside fn, as Guard returns it.
func errExecInGuard(t *testing.T, lease *dlock.Lease) error {
	t.Helper()
	var e error
	_, _ = lease.Guard(context.Background(), func(p redis.Pipeliner) error { _, e = p.Exec(context.Background()); return e })
	if e == nil || !strings.Contains(e.Error(), "do not Exec") {
		t.Fatalf("Exec inside fn returned %v", e)
	}
	return e
}

// TestGuardQuorum: a quorum has no one store: Guard refuses, saying so, and sends nothing.
func TestGuardQuorum(t *testing.T) {
	_, nodes, c := quorumOf(t, 3)
	ctx := ctxTimeout(t, 20*time.Second)
	lease := mustLock(t, c.Mutex("guard-quorum"), ctx)
	defer lease.Unlock(ctx)
	for _, rdb := range nodes {
		guardRefused(t, rdb, lease, "a quorum has no single store", func(context.Context, redis.Pipeliner) {})
	}
}

// TestGuardHandOff: within one process a Mutex handed on keeps its key and token, so only
// the lease's own end tells the two holders apart: the earlier lease is refused here,
// the later one writes.
func TestGuardHandOff(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	m := newClient(t, rdb).Mutex("guard-handoff")
	first := mustLock(t, m, ctx)
	next := queueUp(t, ctx, m, 1)
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-next
	if second == nil {
		t.FailNow()
	}
	defer second.Unlock(ctx)
	err := guardIncr(ctx, first, first.Key("n"))
	if !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrReleased) {
		t.Fatalf("the earlier lease's Guard: %v, want ErrNotHeld and ErrReleased", err)
	}
	if err := guardIncr(ctx, second, second.Key("n")); err != nil {
		t.Fatalf("the later lease's Guard: %v", err)
	}
	if n := rdb.Get(ctx, second.Key("n")).Val(); n != "1" {
		t.Fatalf("n = %q, want 1", n)
	}
}

// TestGuardLateDelivery: a guarded write held back on its connection until its call
// timed out and the lease ended, then delivered, applies nothing; the next holder's does.
func TestGuardLateDelivery(t *testing.T) {
	srv, rdb := standalone(t)
	lp := newLateProcess(t, srv)
	ctx := ctxTimeout(t, 30*time.Second)
	lease := mustLock(t, lp.Mutex("guard-late"), ctx)
	key := lease.Key("n")
	held, done := lp.hold(t, func() error {
		gctx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		return guardIncr(gctx, lease, key)
	})
	if err := <-done; err == nil {
		t.Fatal("the held Guard returned no error")
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	next := mustLock(t, newClient(t, rdb).Mutex("guard-late"), ctx)
	defer next.Unlock(ctx)
	if err := guardIncr(ctx, next, key); err != nil {
		t.Fatal(err)
	}
	land(t, held)
	if n := rdb.Get(ctx, key).Val(); n != "1" {
		t.Fatalf("%s = %q after the late guarded write landed, want 1 (the next holder's alone)", key, n)
	}
}

// guardPauseTTL is the lease of the worker that TestGuardPausedProcess stops.
const guardPauseTTL = 300 * time.Millisecond

// guardWorker is the worker of TestGuardPausedProcess, on the deployment its environment
// names (workerClient): it takes the Mutex "guard-paused", says "held", and, once a line
// comes on stdin, increments a key with Guard and prints the outcome.
func guardWorker() int {
	c, rdb, err := workerClient()
	if err != nil {
		fmt.Println(err)
		return 2
	}
	defer rdb.Close()
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	lease, err := c.Mutex("guard-paused", dlock.TTL(guardPauseTTL)).Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return 1
	}
	fmt.Println("held")
	if _, err := bufio.NewReader(os.Stdin).ReadString('\n'); err != nil {
		return 1
	}
	err = guardIncr(ctx, lease, lease.Key("n"))
	fmt.Printf("guard: not-held=%v lost=%v: %v\n", errors.Is(err, dlock.ErrNotHeld), errors.Is(err, dlock.ErrLost), err)
	return 0
}
