package scripts

import (
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestFairRuns: a FairMutex release that grants the head of the queue takes the live
// waiters of the head's process queued right behind it into its run (fair_release.lua),
// marks them so that their attempts neither queue them again nor take the lock while
// their process holds it, and every way a run ends puts what is left of it back at the
// head of the queue, in order.
func TestFairRuns(t *testing.T) {
	t.Parallel()
	r := newFairRig(t, "runs")
	rdb, k := r.rdb, r.k

	must(t, r.acquire("aaaa0"), nil, 1)
	for _, w := range []string{"aaaa1", "aaaa2", "aaaa3", "aaaaz", "aaaa4", "bbbb1", "aaaa5"} {
		if r.acquire(w) > 0 {
			t.Fatalf("%s acquired a held lock", w)
		}
	}
	// A waiter of aaaa1's process that died (its entry's deadline passed) is skipped.
	rdb.ZAdd(ctx, k.QueueDeadlines(), redis.Z{Score: 1, Member: "aaaaz"})

	// The run is bounded by ARGV[7]: aaaa2 and aaaa3 only.
	ps := r.subscribe("aaaa1")
	r.release("aaaa0", "2")
	r.grant(ps, "grant:aaaa1:aaaa1:4:3:aaaa2,aaaa3")
	r.queue("aaaaz", "aaaa4", "bbbb1", "aaaa5")

	// A run member's attempt while its process holds: refused, not queued again.
	if r.acquire("aaaa2") > 0 {
		t.Fatal("a run member took the lock its process holds")
	}
	r.queue("aaaaz", "aaaa4", "bbbb1", "aaaa5")

	// The hold hands aaaa2 the lock in its process (nothing in Redis), then aaaa2's Unlock
	// (the key keeps aaaa1's token) goes through Redis with aaaa3 left: aaaa3 goes back to the head, is granted, and takes
	// aaaa4 into its own run, past the dead aaaaz; bbbb1 stops it.
	ps = r.subscribe("aaaa3")
	r.release("aaaa1", "63", "aaaa3")
	r.grant(ps, "grant:aaaa3:aaaa3:6:2:aaaa4")
	r.queue("bbbb1", "aaaa5")
	if n := rdb.ZCount(ctx, k.QueueDeadlines(), "-inf", "(0").Val(); n != 1 {
		t.Fatalf("%d marks, want 1 (aaaa4's): the release drops the marks of its own run", n)
	}

	// aaaa3 never heard of its grant and confirms it with an attempt: its run (aaaa4) goes
	// back to the head.
	must(t, r.acquire("aaaa3"), nil, 6)
	r.queue("aaaa4", "bbbb1", "aaaa5")

	// A run whose hold is lost (its key deleted): the first member to ask puts the run
	// back at the head, in order, and takes the free lock.
	ps = r.subscribe("aaaa4")
	r.release("aaaa3", "63")
	r.grant(ps, "grant:aaaa4:aaaa4:7:1")
	must(t, r.acquire("aaaa4"), nil, 7)
	for _, w := range []string{"aaaa6", "aaaa7", "aaaa8"} {
		r.acquire(w)
	}
	r.queue("bbbb1", "aaaa5", "aaaa6", "aaaa7", "aaaa8")
	r.release("aaaa4", "63") // to bbbb1, no run: aaaa5 is another process's
	ps = r.subscribe("aaaa5")
	r.release("bbbb1", "63")
	r.grant(ps, "grant:aaaa5:aaaa5:12:4:aaaa6,aaaa7,aaaa8")
	rdb.Del(ctx, k.Lock)
	if got := r.acquire("aaaa7"); got > 0 {
		t.Fatalf("aaaa7 took the lock ahead of aaaa6: %d", got)
	}
	r.queue("aaaa6", "aaaa7", "aaaa8")
	must(t, r.acquire("aaaa6"), nil, 13)
	r.queue("aaaa7", "aaaa8")

	// Nothing is left once the queue drains.
	r.release("aaaa6", "0")
	r.release("aaaa7", "0")
	r.release("aaaa8", "0")
	if n := rdb.Exists(ctx, k.Lock, k.Queue(), k.QueueDeadlines()).Val(); n != 0 {
		t.Fatalf("%d of the lock, queue and deadlines keys left", n)
	}
}

// TestFairRunOfUnheardGrantKeepsItsPlace: when no one in its process hears of a grant (its
// grantee gave up as it was handed the lock, or the lock's key went away first), the
// grant's run goes back to the head of the queue, in order, ahead of the waiters of other
// processes that were queued behind it.
func TestFairRunOfUnheardGrantKeepsItsPlace(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		unhear func(r *fairRig)
		// what follows: the grant published after unhear, if any, and the queue.
		grantee, grant string
		queue          []string
		marks          int64 // of the new grant's run
	}{
		{
			name:    "grantee gave up",
			unhear:  func(r *fairRig) { r.leave("aaaa1") },
			grantee: "aaaa2", grant: "grant:aaaa2:aaaa2:6:2:aaaa3",
			queue: []string{"bbbb1"}, marks: 1,
		},
		{
			name: "key deleted, another process asks",
			unhear: func(r *fairRig) {
				r.rdb.Del(ctx, r.k.Lock)
				if got := r.acquire("bbbb1"); got > 0 {
					r.t.Fatalf("bbbb1 took the free lock ahead of the run queued before it: %d", got)
				}
			},
			queue: []string{"aaaa2", "aaaa3", "bbbb1"},
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r := newFairRig(t, "unheard")
			must(t, r.acquire("aaaa0"), nil, 1)
			for _, w := range []string{"aaaa1", "aaaa2", "aaaa3", "bbbb1"} {
				r.acquire(w)
			}
			r.release("aaaa0", "63") // to aaaa1, with aaaa2 and aaaa3 in its run
			r.queue("bbbb1")
			var ps *redis.PubSub
			if tc.grantee != "" {
				ps = r.subscribe(tc.grantee)
			}
			tc.unhear(r)
			if ps != nil {
				r.grant(ps, tc.grant)
			}
			r.queue(tc.queue...)
			if n := r.rdb.ZCount(ctx, r.k.QueueDeadlines(), "-inf", "(0").Val(); n != tc.marks {
				t.Fatalf("%d marks, want %d", n, tc.marks)
			}
			r.drain()
		})
	}
}

// fairRig drives one FairMutex's scripts as the waiters of two processes would: waiter
// tokens start with 4 characters of process (aaaa, bbbb).
type fairRig struct {
	t       *testing.T
	rdb     *redis.Client
	k       keyspace.Keys
	fk      []string
	granted string
}

const rigPrefixLen = "4"

func newFairRig(t *testing.T, name string) *fairRig {
	k := keys(t, name)
	return &fairRig{
		t:       t,
		rdb:     redistest.Start(t).Client(t),
		k:       k,
		fk:      []string{k.Lock, k.Fence, k.Queue(), k.QueueDeadlines()},
		granted: k.GrantedPrefix(),
	}
}

// acquire is an attempt of the waiter tok; it returns the script's reply.
func (r *fairRig) acquire(tok string) int64 {
	r.t.Helper()
	got, err := FairAcquire.Run(ctx, r.rdb, r.fk, tok, ttlArg, "3000", "0", rigPrefixLen).Int64()
	if err != nil {
		r.t.Fatal(err)
	}
	return got
}

// release is tok's Unlock, with runs of at most most waiters and the rest of its run.
func (r *fairRig) release(tok, most string, run ...string) {
	r.t.Helper()
	args := []any{tok, "3000", r.granted, "PUBLISH", "release", rigPrefixLen, most}
	for _, w := range run {
		args = append(args, w)
	}
	got, err := FairRelease.Run(ctx, r.rdb, r.fk, args...).Int64()
	must(r.t, got, err, 1)
}

// leave is the waiter tok giving up.
func (r *fairRig) leave(tok string) {
	r.t.Helper()
	got, err := FairRelease.Run(ctx, r.rdb, r.fk, tok, "3000", r.granted, "PUBLISH", "leave", rigPrefixLen, "63").Int64()
	must(r.t, got, err, 1)
}

// queue fails unless the queue is want, in order.
func (r *fairRig) queue(want ...string) {
	r.t.Helper()
	if got := r.rdb.LRange(ctx, r.k.Queue(), 0, -1).Val(); fmt.Sprint(got) != fmt.Sprint(want) {
		r.t.Fatalf("queue %v, want %v", got, want)
	}
}

// subscribe listens for the grants of the waiter tok.
func (r *fairRig) subscribe(tok string) *redis.PubSub {
	r.t.Helper()
	return confirmed(r.t, r.rdb.Subscribe(ctx, r.granted+tok))
}

// drain releases the lock and lets every waiter take it in turn, and then fails if a key
// of the lock is left.
func (r *fairRig) drain() {
	r.t.Helper()
	for range 100 {
		if holder, err := r.rdb.Get(ctx, r.k.Lock).Result(); err == nil {
			r.release(holder, "0")
			continue
		}
		head, err := r.rdb.LIndex(ctx, r.k.Queue(), 0).Result()
		if err == redis.Nil {
			break
		}
		r.acquire(head)
	}
	if n := r.rdb.Exists(ctx, r.k.Lock, r.k.Queue(), r.k.QueueDeadlines()).Val(); n != 0 {
		r.t.Fatalf("%d of the lock, queue and deadlines keys left", n)
	}
}

// grant fails unless the next message on ps is want.
func (r *fairRig) grant(ps *redis.PubSub, want string) {
	r.t.Helper()
	msg, err := ps.ReceiveTimeout(ctx, 5*time.Second)
	if err != nil {
		r.t.Fatalf("no grant %q: %v", want, err)
	}
	if m, ok := msg.(*redis.Message); !ok || m.Payload != want {
		r.t.Fatalf("published %v, want %q", msg, want)
	}
}
