package dlock_test

import (
	"testing"
	"time"
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
// still runs a Guard, which loads it again.
func TestGuardAfterScriptFlush(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 10*time.Second)
	lease := mustLock(t, newClient(t, rdb).Mutex("guard-flush"), ctx)
	defer lease.Unlock(ctx)
	key := lease.Key("n")
	for range 2 {
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if err := guardIncr(ctx, lease, key); err != nil {
			t.Fatalf("Guard after SCRIPT FLUSH: %v", err)
		}
	}
	if n := rdb.Get(ctx, key).Val(); n != "2" {
		t.Fatalf("%s = %q, want 2", key, n)
	}
}
