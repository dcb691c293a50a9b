package scripts

import (
	"fmt"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestFairRuns: a FairMutex release that grants the head of the queue takes the live
// waiters of the head's process queued right behind it into its run (fair_release.lua),
// marks them so that their attempts neither queue them again nor take the lock while
// their process holds it, and every way a run ends puts what is left of it back at the
// head of the queue, in order.
func TestFairRuns(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "runs")
	fk := []string{k.Lock, k.Fence, k.Queue(), k.QueueDeadlines()}
	granted := k.GrantedPrefix()
	// Waiter tokens: 4 characters of process (aaaa, bbbb), then the waiter.
	const plen = "4"
	acquire := func(tok string) int64 {
		t.Helper()
		got, err := FairAcquire.Run(ctx, rdb, fk, tok, ttlArg, "3000", "0", plen).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return got
	}
	release := func(tok, most string, run ...string) {
		t.Helper()
		args := []any{tok, "3000", granted, "PUBLISH", "release", plen, most}
		for _, w := range run {
			args = append(args, w)
		}
		got, err := FairRelease.Run(ctx, rdb, fk, args...).Int64()
		must(t, got, err, 1)
	}
	queue := func(want ...string) {
		t.Helper()
		if got := rdb.LRange(ctx, k.Queue(), 0, -1).Val(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("queue %v, want %v", got, want)
		}
	}
	grant := func(ps *redis.PubSub, want string) {
		t.Helper()
		msg, err := ps.ReceiveMessage(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if msg.Payload != want {
			t.Fatalf("published %q, want %q", msg.Payload, want)
		}
	}

	must(t, acquire("aaaa0"), nil, 1)
	for _, w := range []string{"aaaa1", "aaaa2", "aaaa3", "aaaaz", "aaaa4", "bbbb1", "aaaa5"} {
		if acquire(w) > 0 {
			t.Fatalf("%s acquired a held lock", w)
		}
	}
	// A waiter of aaaa1's process that died (its entry's deadline passed) is skipped.
	rdb.ZAdd(ctx, k.QueueDeadlines(), redis.Z{Score: 1, Member: "aaaaz"})

	// The run is bounded by ARGV[7]: aaaa2 and aaaa3 only.
	ps := confirmed(t, rdb.Subscribe(ctx, granted+"aaaa1"))
	release("aaaa0", "2")
	grant(ps, "grant:aaaa1:aaaa1:4:3:aaaa2,aaaa3")
	queue("aaaaz", "aaaa4", "bbbb1", "aaaa5")

	// A run member's attempt while its process holds: refused, not queued again.
	if acquire("aaaa2") > 0 {
		t.Fatal("a run member took the lock its process holds")
	}
	queue("aaaaz", "aaaa4", "bbbb1", "aaaa5")

	// The hold hands aaaa2 the lock in its process (nothing in Redis), then aaaa2's Unlock
	// (the key keeps aaaa1's token) goes through Redis with aaaa3 left: aaaa3 goes back to the head, is granted, and takes
	// aaaa4 into its own run, past the dead aaaaz; bbbb1 stops it.
	ps = confirmed(t, rdb.Subscribe(ctx, granted+"aaaa3"))
	release("aaaa1", "63", "aaaa3")
	grant(ps, "grant:aaaa3:aaaa3:6:2:aaaa4")
	queue("bbbb1", "aaaa5")
	if n := rdb.ZCount(ctx, k.QueueDeadlines(), "-inf", "(0").Val(); n != 1 {
		t.Fatalf("%d marks, want 1 (aaaa4's): the release drops the marks of its own run", n)
	}

	// aaaa3 never heard of its grant and confirms it with an attempt: its run (aaaa4) goes
	// back to the head.
	must(t, acquire("aaaa3"), nil, 6)
	queue("aaaa4", "bbbb1", "aaaa5")

	// A run whose hold is lost (its key deleted): the first member to ask puts the run
	// back at the head, in order, and takes the free lock.
	ps = confirmed(t, rdb.Subscribe(ctx, granted+"aaaa4"))
	release("aaaa3", "63")
	grant(ps, "grant:aaaa4:aaaa4:7:1")
	must(t, acquire("aaaa4"), nil, 7)
	for _, w := range []string{"aaaa6", "aaaa7", "aaaa8"} {
		acquire(w)
	}
	queue("bbbb1", "aaaa5", "aaaa6", "aaaa7", "aaaa8")
	release("aaaa4", "63") // to bbbb1, no run: aaaa5 is another process's
	ps = confirmed(t, rdb.Subscribe(ctx, granted+"aaaa5"))
	release("bbbb1", "63")
	grant(ps, "grant:aaaa5:aaaa5:12:4:aaaa6,aaaa7,aaaa8")
	rdb.Del(ctx, k.Lock)
	if got := acquire("aaaa7"); got > 0 {
		t.Fatalf("aaaa7 took the lock ahead of aaaa6: %d", got)
	}
	queue("aaaa6", "aaaa7", "aaaa8")
	must(t, acquire("aaaa6"), nil, 13)
	queue("aaaa7", "aaaa8")

	// Nothing is left once the queue drains.
	release("aaaa6", "0")
	release("aaaa7", "0")
	release("aaaa8", "0")
	if n := rdb.Exists(ctx, k.Lock, k.Queue(), k.QueueDeadlines()).Val(); n != 0 {
		t.Fatalf("%d of the lock, queue and deadlines keys left", n)
	}
}
