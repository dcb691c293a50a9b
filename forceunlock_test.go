package dlock_test

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// forceHook runs before ahead of each force_unlock.lua its client sends (as EVALSHA,
// which go-redis's Script.Run always tries first): the lock changes hands between
// ForceUnlock's reading and its removal.
type forceHook struct {
	before func()
	forces atomic.Int32
}

func (h *forceHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *forceHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if name, _ := args[0].(string); strings.EqualFold(name, "evalsha") && args[1] == scripts.ForceUnlock.Hash() {
			h.forces.Add(1)
			h.before()
		}
		return next(ctx, cmd)
	}
}

func (h *forceHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// hooked is a dlock Client on its own connection to rdb's server, with h on it.
func hooked(t *testing.T, rdb *redis.Client, h redis.Hook) *dlock.Client {
	t.Helper()
	own := redis.NewClient(rdb.Options())
	own.AddHook(h)
	t.Cleanup(func() { _ = own.Close() })
	return newClient(t, own)
}

// TestForceUnlockRemovesWhatItRead: a lease taken between ForceUnlock's reading and its
// removal is not removed by that removal; ForceUnlock reads again and removes, and
// reports, the lock as it is then.
func TestForceUnlockRemovesWhatItRead(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := ctxTimeout(t, 20*time.Second)
	const ttl = 600 * time.Millisecond
	first := mustLock(t, a.Mutex("k", dlock.TTL(ttl)), ctx)
	var second *dlock.Lease
	var secondToken string
	h := &forceHook{}
	h.before = func() {
		if h.forces.Load() > 1 {
			return
		}
		_ = first.Unlock(ctx)
		second = mustLock(t, b.Mutex("k", dlock.TTL(ttl)), ctx)
		in, err := b.Inspect(ctx, "k")
		if err != nil || len(in.Holders) != 1 {
			t.Errorf("Inspect after the second Lock: %+v, %v", in, err)
			return
		}
		secondToken = in.Holders[0].Token
	}
	removed, err := hooked(t, rdb, h).ForceUnlock(ctx, "k")
	if err != nil {
		t.Fatal(err)
	}
	if n := h.forces.Load(); n != 2 {
		t.Fatalf("%d removals sent, want 2: the first found the lock changed", n)
	}
	if len(removed.Holders) != 1 || removed.Holders[0].Token != secondToken || removed.Fence != second.Token() {
		t.Fatalf("ForceUnlock reported %+v, want the second holder %s, fence %d", removed, secondToken, second.Token())
	}
	waitClosed(t, second.Done(), 5*time.Second, "the second lease to end")
	if !errors.Is(second.Err(), dlock.ErrLost) || !errors.Is(first.Err(), dlock.ErrReleased) {
		t.Fatalf("leases ended with %v and %v, want ErrReleased and ErrLost", first.Err(), second.Err())
	}
}

// TestForceUnlockLeavesABusyLock: a lock that changes hands before every removal is in
// use, not stuck: after forceRounds tries ForceUnlock gives up with ErrLockChanged and
// its newest holder keeps it.
func TestForceUnlockLeavesABusyLock(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	holder := newClient(t, rdb)
	ctx := ctxTimeout(t, 20*time.Second)
	m := holder.Semaphore("busy", 2)
	lease, err := m.Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	h := &forceHook{}
	h.before = func() { // a new holder before every removal
		next, err := m.Acquire(ctx, 1)
		if err != nil {
			t.Errorf("Acquire: %v", err)
			return
		}
		_ = lease.Unlock(ctx)
		lease = next
	}
	_, err = hooked(t, rdb, h).ForceUnlock(ctx, "busy")
	var ne *dlock.NodeError
	if !errors.Is(err, dlock.ErrLockChanged) || !errors.As(err, &ne) {
		t.Fatalf("ForceUnlock of a busy lock: %v, want ErrLockChanged in a NodeError", err)
	}
	if n := h.forces.Load(); n != 5 {
		t.Fatalf("%d removals sent, want 5", n)
	}
	if lease.Err() != nil {
		t.Fatalf("the newest holder's lease ended: %v", lease.Err())
	}
	in, err := holder.Inspect(ctx, "busy")
	if err != nil || len(in.Holders) != 1 || in.Fence != lease.Token() {
		t.Fatalf("after ForceUnlock gave up: %+v, %v; want the newest holder", in, err)
	}
}
