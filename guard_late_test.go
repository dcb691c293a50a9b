package dlock_test

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/guard"
)

// TestGuardAppliedOnce: a guarded write whose reply go-redis gave up on (its ReadTimeout,
// which go-redis retries by default) is not sent again: its one copy, delivered late while
// the lease still holds, applies the commands once, not twice.
func TestGuardAppliedOnce(t *testing.T) {
	srv, rdb := standalone(t)
	lp := newLateProcessRT(t, srv, 200*time.Millisecond)
	ctx := ctxTimeout(t, 30*time.Second)
	lease := mustLock(t, lp.Mutex("guard-once"), ctx)
	defer lease.Unlock(ctx)
	key := lease.Key("n")
	if err := guardIncr(ctx, lease, lease.Key("warm-up")); err != nil { // the server knows the script
		t.Fatal(err)
	}
	held, done := lp.hold(t, func() error { return guardIncr(ctx, lease, key) })
	if err := <-done; err == nil {
		t.Fatal("the held Guard returned no error: go-redis sent it again")
	}
	land(t, held)
	if n := rdb.Get(ctx, key).Val(); n != "1" {
		t.Fatalf("%s = %q once the held Guard landed, want 1 (applied once)", key, n)
	}
}

// TestGuardAfterScriptFlush: a server that forgot the script (SCRIPT FLUSH, a restart)
// still runs a Guard, which sends the script itself (EVAL) in one round trip after the
// EVALSHA it refused: no SCRIPT LOAD between them.
func TestGuardAfterScriptFlush(t *testing.T) {
	srv, rdb := standalone(t)
	ctx := ctxTimeout(t, 10*time.Second)
	hooked := redis.NewClient(srv.Options())
	t.Cleanup(func() { _ = hooked.Close() })
	sent := &commandNames{}
	hooked.AddHook(sent)
	lease := mustLock(t, newClient(t, hooked).Mutex("guard-flush"), ctx)
	defer lease.Unlock(ctx)
	key := lease.Key("n")
	for range 2 {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		sent.reset()
		if err := guardIncr(ctx, lease, key); err != nil {
			t.Fatalf("Guard after SCRIPT FLUSH: %v", err)
		}
		if got := sent.names(); !slices.Equal(got, []string{"evalsha", "eval"}) {
			t.Fatalf("Guard after SCRIPT FLUSH sent %v, want evalsha then eval", got)
		}
	}
	if n := rdb.Get(ctx, key).Val(); n != "2" {
		t.Fatalf("%s = %q, want 2", key, n)
	}
}

// commandNames is a go-redis hook that records the name of each script command
// (EVALSHA, EVAL, SCRIPT) a client sends on its own.
type commandNames struct {
	mu   sync.Mutex
	sent []string
}

func (h *commandNames) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *commandNames) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "evalsha" || name == "eval" || name == "script" {
			h.mu.Lock()
			h.sent = append(h.sent, name)
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *commandNames) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

func (h *commandNames) reset() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.sent = nil
}

func (h *commandNames) names() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.sent)
}

// TestGuardLongCommand: a command of as many arguments as Guard sends runs; one longer,
// which the script could not pass to Redis after running the commands before it, is
// refused before anything is sent, so the INCR before it is not applied either.
func TestGuardLongCommand(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 10*time.Second)
	lease := mustLock(t, newClient(t, rdb).Mutex("guard-long"), ctx)
	defer lease.Unlock(ctx)
	push := func(n int) ([]redis.Cmder, error) {
		vals := make([]any, n-2) // RPUSH and the key
		for i := range vals {
			vals[i] = i
		}
		return lease.Guard(ctx, func(p redis.Pipeliner) error {
			p.Incr(ctx, lease.Key("n"))
			p.RPush(ctx, lease.Key("l"), vals...)
			return nil
		})
	}
	if _, err := push(guard.MaxArgs); err != nil {
		t.Fatalf("RPUSH of %d arguments: %v", guard.MaxArgs, err)
	}
	cmds, err := push(guard.MaxArgs + 1000)
	if err == nil || cmds[0].Err() == nil {
		t.Fatalf("RPUSH of %d arguments: %v, INCR's %v, want refused", guard.MaxArgs+1000, err, cmds[0].Err())
	}
	if n, l := rdb.Get(ctx, lease.Key("n")).Val(), rdb.LLen(ctx, lease.Key("l")).Val(); n != "1" || l != guard.MaxArgs-2 {
		t.Fatalf("n = %q, %d in the list after the refusal: want 1 and %d (the first Guard's alone)", n, l, guard.MaxArgs-2)
	}
	if lease.Err() != nil {
		t.Fatalf("the lease ended: %v", lease.Err())
	}
}

// revivedGuard runs a guarded write of a lease whose acquisition go-redis sent twice (the
// first copy held by a proxy, the second, after its ReadTimeout, taking the lock): the
// lease makes a guarded write that is held too, is unlocked, and another holder writes.
// After wait, the held acquisition lands, then the held Guard. It returns the list the
// Guards appended to.
func revivedGuard(t *testing.T, wait time.Duration) []string {
	srv, rdb := standalone(t)
	lp := newLateProcessRT(t, srv, 150*time.Millisecond)
	ctx := ctxTimeout(t, time.Minute)
	const name = "guard-revived"
	var lease *dlock.Lease
	acq, done := lp.hold(t, func() (err error) {
		lease, err = lp.Mutex(name, dlock.TTL(time.Second)).Lock(ctx)
		return err
	})
	if err := <-done; err != nil {
		t.Fatalf("Lock: %v", err)
	}
	key := lease.Key("log")
	if err := guardPush(ctx, lease, key, "A"); err != nil { // the server knows the script
		t.Fatal(err)
	}
	stale, done := lp.hold(t, func() error { return guardPush(ctx, lease, key, "A-late") })
	if err := <-done; err == nil {
		t.Fatal("the held Guard returned no error")
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	next := mustLock(t, newClient(t, rdb).Mutex(name), ctx)
	if err := guardPush(ctx, next, key, "B"); err != nil {
		t.Fatal(err)
	}
	if err := next.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	time.Sleep(wait)
	land(t, acq)
	land(t, stale)
	return rdb.LRange(ctx, key, 0, -1).Val()
}

func guardPush(ctx context.Context, l *dlock.Lease, key, v string) error {
	_, err := l.Guard(ctx, func(p redis.Pipeliner) error { return p.RPush(ctx, key, v).Err() })
	return err
}

// TestGuardLateAfterResentAcquisition: a copy of the lease's acquisition that go-redis
// resent and a guarded write of the lease, both landing after the next holder's write
// (within the 10 seconds a token is remembered), take and apply nothing.
func TestGuardLateAfterResentAcquisition(t *testing.T) {
	if got := revivedGuard(t, 0); !slices.Equal(got, []string{"A", "B"}) {
		t.Fatalf("the guarded writes: %q, want [A B]: the late Guard applied", got)
	}
}

// TestGuardLateBeyondTombstone is a known gap, skipped unless DLOCK_KNOWN_GAPS is set:
// the acquisition's copy landing more than 10 seconds after the lease's end (beyond
// gone.lua's GONE_MS, docs/guarantees.md) takes the free lock with the lease's token, and
// the lease's late Guard then applies, after the next holder's write.
func TestGuardLateBeyondTombstone(t *testing.T) {
	if os.Getenv("DLOCK_KNOWN_GAPS") == "" {
		t.Skip("a known gap (docs/guard.md): set DLOCK_KNOWN_GAPS=1 to run it (12s)")
	}
	if got := revivedGuard(t, 11*time.Second); !slices.Equal(got, []string{"A", "B"}) {
		t.Fatalf("the guarded writes: %q, want [A B]: the late Guard applied", got)
	}
}
