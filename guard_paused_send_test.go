package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// pauseGuard is a go-redis hook that holds the first guard script a client sends, after
// every check of its caller has passed and before it is written, until release is closed,
// as a holder paused at that instant would; reply is then the script's reply.
type pauseGuard struct {
	reached, release chan struct{}
	reply            chan any
}

func (h *pauseGuard) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *pauseGuard) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) < 2 || cmd.Name() != "evalsha" || args[1] != scripts.Guard.Hash() {
			return next(ctx, cmd)
		}
		close(h.reached)
		<-h.release
		err := next(ctx, cmd)
		h.reply <- cmd.(interface{ Val() any }).Val()
		return err
	}
}

func (h *pauseGuard) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestGuardRedisRefusesAPausedHolder: a holder paused after its own checks passed, with
// its guarded write about to be sent, until its lease expired and another holder took the
// lock and wrote, is refused by Redis when it resumes: the script finds another token in
// the lock and applies nothing, the error wraps ErrNotHeld and ErrLost, and the lease is
// lost. On a Cluster the guarded key (Lease.Key) shares the lock's hash slot.
func TestGuardRedisRefusesAPausedHolder(t *testing.T) {
	t.Parallel()
	onGuardDeployments(t, func(t *testing.T, d deployment) {
		ctx := ctxTimeout(t, 30*time.Second)
		paused := d.dial(t)
		hook := &pauseGuard{reached: make(chan struct{}), release: make(chan struct{}), reply: make(chan any, 1)}
		paused.AddHook(hook)
		// No renewals: the paused process would not renew either.
		lease, err := newClient(t, paused).Mutex("guard-paused-send", dlock.TTL(time.Second), dlock.NoRenew()).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		key := lease.Key("n")
		// Every server knows the script: the held EVALSHA is the one request.
		if err := scripts.Guard.Load(ctx, d.nodes[0]).Err(); err != nil {
			t.Fatal(err)
		}
		guarded := make(chan error, 1)
		go func() { guarded <- guardIncr(ctx, lease, key) }()
		<-hook.reached

		next := mustLock(t, d.client().Mutex("guard-paused-send"), ctx) // once the lease expired
		defer next.Unlock(ctx)
		if err := guardIncr(ctx, next, key); err != nil {
			t.Fatal(err)
		}
		close(hook.release)
		refusedAndApplied(t, <-guarded, <-hook.reply, d.nodes[0].Get(ctx, key).Val(), lease)
	})
}

// refusedAndApplied fails the test unless the resumed holder's Guard was refused by the
// guard script itself (reply 0) with ErrNotHeld and ErrLost, its lease is lost, and the
// guarded counter holds the next holder's write alone.
func refusedAndApplied(t *testing.T, err error, reply any, n string, lease *dlock.Lease) {
	t.Helper()
	if reply != int64(0) {
		t.Fatalf("the guard script replied %v, want 0: Redis's own check refused it", reply)
	}
	if !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("the resumed Guard = %v, want ErrNotHeld and ErrLost", err)
	}
	if n != "1" {
		t.Fatalf("the guarded counter = %q, want 1: the paused holder's write was applied", n)
	}
	if !errors.Is(lease.Err(), dlock.ErrLost) {
		t.Fatalf("the paused holder's lease: Err = %v, want ErrLost", lease.Err())
	}
	t.Log(err)
}
