package scripts

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// proclaim runs election_proclaim.lua for token's term (fence 7) with its seq-th write,
// publishing on the lock's channel, which the late rig listens on.
func proclaimFor(rdb redis.Scripter, k keyspace.Keys, token string, seq int, value string) (int64, error) {
	return ElectionProclaim.Run(ctx, rdb, []string{k.Lock, k.Leader()}, token, "7", seq, value, "owner", k.Channel, "PUBLISH").Int64()
}

func extendElection(rdb redis.Scripter, k keyspace.Keys, token string, ttl time.Duration) (int64, error) {
	return MutexExtend.Run(ctx, rdb, []string{k.Lock, k.Gone, k.Leader()}, token, ttl.Milliseconds()).Int64()
}

// wantRecord fails unless the record names token with value.
func (r *lateRig) wantRecord(t *testing.T, token, value string) {
	t.Helper()
	got := r.rdb.HMGet(ctx, r.k.Leader(), "token", "value").Val()
	if len(got) != 2 || got[0] != any(token) || got[1] != any(value) {
		t.Fatalf("record = %v, want token %s value %q", got, token, value)
	}
}

// TestElectionProclaim: a write while holding sets the record, keeps since within the term,
// expires with the lock, and is published; the record of the next term starts anew.
func TestElectionProclaim(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "proclaim")
	rdb.Set(ctx, k.Lock, tokenA, time.Minute)
	got, err := proclaimFor(rdb, k, tokenA, 1, "a1")
	ok(t, got, err, 1)
	since := rdb.HGet(ctx, k.Leader(), "since").Val()
	time.Sleep(5 * time.Millisecond)
	got, err = proclaimFor(rdb, k, tokenA, 2, "a2")
	ok(t, got, err, 1)
	if got := rdb.HGet(ctx, k.Leader(), "since").Val(); got != since {
		t.Fatalf("since moved within a term: %s, then %s", since, got)
	}
	if left := rdb.PTTL(ctx, k.Leader()).Val(); left <= 0 || left > time.Minute {
		t.Fatalf("record PTTL %v, want the lock's", left)
	}
	rdb.Set(ctx, k.Lock, tokenB, time.Minute)
	got, err = proclaimFor(rdb, k, tokenB, 1, "b1")
	ok(t, got, err, 1)
	if got := rdb.HGet(ctx, k.Leader(), "since").Val(); got == since {
		t.Fatal("the next term kept the previous term's since")
	}
	reply, err := ElectionRead.Run(ctx, rdb, []string{k.Lock, k.Leader()}, "").Slice()
	if err != nil || len(reply) != 8 || reply[0] != any(tokenB) || reply[2] != any(tokenB) || reply[5] != any("b1") {
		t.Fatalf("election_read = %v, %v", reply, err)
	}
	got, err = extendElection(rdb, k, tokenB, 2*time.Minute)
	ok(t, got, err, 1)
	if left := rdb.PTTL(ctx, k.Leader()).Val(); left <= time.Minute {
		t.Fatalf("record PTTL %v after the extend, want it lengthened with the lock", left)
	}
}

// TestLateElectionProclaim: a write that lands after its term ended, after the next term
// began, or after a later write of its own term.
func TestLateElectionProclaim(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	land := func(t *testing.T, r *lateRig) (int64, error) { return proclaimFor(r.rdb, r.k, tokenA, 2, "late") }
	runLate(t, rdb, "election_proclaim", []late{
		{"after the term ended: writes nothing", func(t *testing.T, r *lateRig) {
			r.rdb.HSet(ctx, r.k.Leader(), "token", tokenA, "seq", "1", "value", "a1")
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			r.wantRecord(t, tokenA, "a1")
			r.wantGone(t, r.k.Lock)
			r.quiet(t)
		}},
		{"after the next term wrote: changes nothing", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenB)
			r.rdb.HSet(ctx, r.k.Leader(), "token", tokenB, "seq", "1", "value", "b1")
			r.rdb.PExpire(ctx, r.k.Leader(), otherLong)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			r.wantRecord(t, tokenB, "b1")
			r.wantLong(t, r.k.Lock)
			r.wantLong(t, r.k.Leader())
			r.quiet(t)
		}},
		{"after the next term began, before it wrote: the old record stays, no longer", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenB)
			r.rdb.HSet(ctx, r.k.Leader(), "token", tokenA, "seq", "1", "value", "a1")
			r.rdb.PExpire(ctx, r.k.Leader(), 20*time.Second)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			r.wantRecord(t, tokenA, "a1")
			r.wantPTTL(t, r.k.Leader(), 1, 20*time.Second)
			r.quiet(t)
		}},
		{"after a later write of its term: changes nothing", func(t *testing.T, r *lateRig) {
			r.rdb.Set(ctx, r.k.Lock, tokenA, 20*time.Second)
			r.rdb.HSet(ctx, r.k.Leader(), "token", tokenA, "seq", "3", "value", "a3")
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 2)
			r.wantRecord(t, tokenA, "a3")
			r.wantPTTL(t, r.k.Lock, 1, 20*time.Second)
			r.quiet(t)
		}},
	})
}

// TestLateElectionExtend: a term's renewal (mutex_extend.lua with the record) that lands
// after the term ended never keeps the lock or another term's record alive.
func TestLateElectionExtend(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	land := func(t *testing.T, r *lateRig) (int64, error) { return extendElection(r.rdb, r.k, tokenA, lateTTL) }
	runLate(t, rdb, "mutex_extend_record", []late{
		{"after the term ended: lengthens nothing", func(t *testing.T, r *lateRig) {
			r.rdb.HSet(ctx, r.k.Leader(), "token", tokenA)
			r.rdb.PExpire(ctx, r.k.Leader(), 20*time.Second)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			r.wantGone(t, r.k.Lock)
			r.wantPTTL(t, r.k.Leader(), 1, 20*time.Second)
		}},
		{"after the next term began: lengthens nothing", func(t *testing.T, r *lateRig) {
			r.rdb.Set(ctx, r.k.Lock, tokenB, 20*time.Second)
			r.rdb.HSet(ctx, r.k.Leader(), "token", tokenB)
			r.rdb.PExpire(ctx, r.k.Leader(), 20*time.Second)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			r.wantPTTL(t, r.k.Lock, 1, 20*time.Second)
			r.wantPTTL(t, r.k.Leader(), 1, 20*time.Second)
		}},
		{"after a longer extension: never shortens", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenA)
			r.rdb.HSet(ctx, r.k.Leader(), "token", tokenA)
			r.rdb.PExpire(ctx, r.k.Leader(), otherLong)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1)
			r.wantLong(t, r.k.Lock)
			r.wantLong(t, r.k.Leader())
		}},
	})
}
