package scripts

import (
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// More late landings, in the rig of late_test.go: mutex_acquire with the standing requests
// of a process, the extend scripts, and the FairMutex scripts. The late call is tokenA's;
// in mutex_acquire it is process p1's standing request unless said otherwise.

const grantLength = 3 * time.Second // pass_on's and fair_release's hand-over length in these tests

// mutexAsk is mutex_acquire as the head of process me's local queue calls it (Lock, not
// TryLock): with the token of its standing request when stands, else with a token that
// does not stand (a fresh token's attempt, or a request's first).
func (r *lateRig) mutexAsk(token, me string, stands bool) (int64, error) {
	return acquireAs(r.rdb, r.k, token, lateTTL, turnArgs{reserve: 1, me: me, first: !stands})
}

// mutexLeave is mutex_release as a process leaves the turns, with its request's token.
func (r *lateRig) mutexLeave(me, token string) (int64, error) {
	return leaveTurns(r.rdb, r.k, me, token)
}

// mutexRelease is mutex_release of a holder, with turns.
func (r *lateRig) mutexRelease(token string) (int64, error) {
	return releaseTurn(r.rdb, r.k, token, "PUBLISH", "20000")
}

// waitingAs makes process me wait in the turns with its standing request token behind
// the holder the key has.
func (r *lateRig) waitingAs(t *testing.T, token, me string) {
	t.Helper()
	if got, err := r.mutexAsk(token, me, true); err != nil || got > 0 {
		t.Fatalf("attempt of %s on a held lock: %d, %v; want a refusal", me, got, err)
	}
}

// wantNoAsk fails unless process me is out of the turns and has no standing request.
func (r *lateRig) wantNoAsk(t *testing.T, me string) {
	t.Helper()
	if got := r.rdb.LRange(ctx, r.k.Turns, 0, -1).Val(); strings.Contains(" "+strings.Join(got, " ")+" ", " "+me+" ") {
		t.Fatalf("turns = %v: %s is listed", got, me)
	}
	if ask, err := r.rdb.HGet(ctx, r.k.Asks, me).Result(); err != redis.Nil {
		t.Fatalf("%s's standing request = %q (%v), want none", me, ask, err)
	}
}

// wantAsk fails unless process me's standing request is token's ("token ttl reserve
// expires", mutex_asks.lua).
func (r *lateRig) wantAsk(t *testing.T, me, token string) {
	t.Helper()
	ask := r.rdb.HGet(ctx, r.k.Asks, me).Val()
	if f := strings.Fields(ask); len(f) != 4 || f[0] != token {
		t.Fatalf("%s's standing request = %q, want %s's", me, ask, token)
	}
}

// TestLateMutexAcquire: a Mutex attempt that lands late. Every acquisition, and every
// grant, makes the token it gives the lock to a tombstone, a key of its own; an
// attempt of a tombstoned token takes nothing and writes nothing, unless the key still
// holds that token.
func TestLateMutexAcquire(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	land := func(t *testing.T, r *lateRig) (int64, error) { return r.mutexAsk(tokenA, "p1", true) }
	// granted: p2 holds with tokenB, p1 waits with its standing request tokenA, p2's
	// release grants it (fence 1).
	granted := func(t *testing.T, r *lateRig) {
		t.Helper()
		r.setLong(t, r.k.Lock, tokenB)
		r.waitingAs(t, tokenA, "p1")
		got, err := r.mutexRelease(tokenB)
		ok(t, got, err, 1)
		r.heard(t, "grant:p1:"+tokenA+":1:1")
	}
	// used: p1's request was granted, p1 held the lock with it and released it (fence 2).
	used := func(t *testing.T, r *lateRig) {
		t.Helper()
		granted(t, r)
		got, err := r.mutexAsk(tokenA, "p1", true) // the grant confirmed
		ok(t, got, err, 2)
		got, err = r.mutexRelease(tokenA)
		ok(t, got, err, 1)
		r.heard(t, "released")
	}
	// held: p1 took the free lock with its standing request, and released it (fence 1).
	held := func(t *testing.T, r *lateRig) {
		t.Helper()
		got, err := r.mutexAsk(tokenA, "p1", true)
		ok(t, got, err, 1)
		got, err = r.mutexRelease(tokenA)
		ok(t, got, err, 1)
		r.heard(t, "released")
	}
	// left: p1's request tokenA waited behind p2 (tokenB) and left (no counter yet).
	left := func(t *testing.T, r *lateRig) {
		t.Helper()
		r.setLong(t, r.k.Lock, tokenB)
		r.waitingAs(t, tokenA, "p1")
		got, err := r.mutexLeave("p1", tokenA)
		ok(t, got, err, 0)
	}
	// gone: the attempt was refused as gone and wrote nothing: the key as holder left it
	// ("" for free), the counter at fence, p1 not listed, nothing published; tokenA's
	// tombstone as it was served, for lease (0: it left).
	gone := func(holder, fence string, lease time.Duration) func(t *testing.T, r *lateRig, reply int64) {
		return func(t *testing.T, r *lateRig, reply int64) {
			wantGoneReply(t, reply)
			r.wantNoAsk(t, "p1")
			if holder == "" {
				r.wantGone(t, r.k.Lock)
			} else {
				r.wantValue(t, r.k.Lock, holder)
				r.wantLong(t, r.k.Lock)
			}
			r.wantValue(t, r.k.Fence, fence)
			r.wantServed(t, tokenA, lease)
			r.quiet(t)
		}
	}
	// acquired: the attempt acquired, with the counter at fence, for at most its own TTL,
	// the key at least min long.
	acquired := func(fence int64, min time.Duration) func(t *testing.T, r *lateRig, reply int64) {
		return func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, fence)
			r.wantValue(t, r.k.Lock, tokenA)
			r.wantPTTL(t, r.k.Lock, min, lateTTL)
			r.wantNoAsk(t, "p1")
			r.wantValue(t, r.k.Fence, strconv.FormatInt(fence, 10))
			r.wantServed(t, tokenA, lateTTL)
		}
	}
	runLate(t, rdb, "mutex_acquire", []late{
		// (a) its own token holds the key
		{"a copy after its own hold was extended: only lengthens", func(t *testing.T, r *lateRig) {
			got, err := r.mutexAsk(tokenA, "p1", true)
			ok(t, got, err, 1)
			r.rdb.PExpire(ctx, r.k.Lock, otherLong)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 2) // a fresh reservation
			r.wantValue(t, r.k.Lock, tokenA)
			r.wantLong(t, r.k.Lock)
			r.wantNoAsk(t, "p1")
			r.wantValue(t, r.k.Fence, "2")
			r.wantServed(t, tokenA, lateTTL)
		}},
		{"after a grant of its request (a grant's length): its own token, lengthened to its TTL at most", granted, land,
			acquired(2, grantLength+time.Millisecond)},
		// (b) the key is free, its token never served
		{"a fresh token's attempt after its undo, free: takes it for at most its TTL", func(t *testing.T, r *lateRig) {
			got, err := release(r.rdb, r.k, tokenA, "PUBLISH") // the undo: found nothing
			ok(t, got, err, 0)
		}, func(t *testing.T, r *lateRig) (int64, error) {
			return r.mutexAsk(tokenA, "p1", false)
		}, acquired(1, 1)},
		{"its request still standing, free (the holder expired): takes it for at most its TTL, the request served", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenB)
			r.waitingAs(t, tokenA, "p1")
			r.rdb.Del(ctx, r.k.Lock)
		}, land, acquired(1, 1)},
		// (c) its token was served or left: gone, whether the key is held or free
		{"after its request was granted and the grant used, another holds: gone, not listed", func(t *testing.T, r *lateRig) {
			used(t, r)
			r.setLong(t, r.k.Lock, tokenC)
		}, land, gone(tokenC, "2", lateTTL)},
		{"after its request was granted and the grant used, free: gone, nothing taken", used, land, gone("", "2", lateTTL)},
		{"after the process took the lock with its request, another holds: gone, not listed", func(t *testing.T, r *lateRig) {
			held(t, r)
			r.setLong(t, r.k.Lock, tokenC)
		}, land, gone(tokenC, "1", lateTTL)},
		{"after the process took the lock with its request, free: gone, nothing taken", held, land, gone("", "1", lateTTL)},
		{"after its leave, held: gone, not listed", left, land, gone(tokenB, "<none>", 0)},
		{"after its leave, free (the holder expired): gone, nothing taken", func(t *testing.T, r *lateRig) {
			left(t, r)
			r.rdb.Del(ctx, r.k.Lock)
		}, land, gone("", "<none>", 0)},
		{"after its leave, its tombstone died, free: as on time, takes it for at most its TTL", func(t *testing.T, r *lateRig) {
			left(t, r)
			r.rdb.Del(ctx, r.k.Lock)
			killTombstone(t, r.rdb, r.k.Gone, tokenA) // the attempt is more than GONE_MS late
		}, land, acquired(1, 1)},
		{"after its leave, promised to another process: gone, the promise stands", func(t *testing.T, r *lateRig) {
			left(t, r)
			r.setLong(t, r.k.Lock, "turn:p2")
		}, land, gone("turn:p2", "<none>", 0)},
		// (d) a newer request of the process stands
		{"after its leave, a newer request of the process stands: it stays, with its place", func(t *testing.T, r *lateRig) {
			left(t, r)
			r.waitingAs(t, tokenB+"x", "p2")
			r.waitingAs(t, tokenC, "p1")
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			wantGoneReply(t, reply)
			r.wantList(t, r.k.Turns, "p2", "p1")
			r.wantAsk(t, "p1", tokenC)
			r.wantValue(t, r.k.Lock, tokenB)
			r.wantLong(t, r.k.Lock)
			r.wantValue(t, r.k.Fence, "<none>")
		}},
		{"after its request was granted and used, a newer request stands: it stays", func(t *testing.T, r *lateRig) {
			used(t, r)
			r.setLong(t, r.k.Lock, tokenB)
			r.waitingAs(t, tokenC, "p1")
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			wantGoneReply(t, reply)
			r.wantList(t, r.k.Turns, "p1")
			r.wantAsk(t, "p1", tokenC)
			r.wantValue(t, r.k.Lock, tokenB)
			r.wantLong(t, r.k.Lock)
			r.wantValue(t, r.k.Fence, "2")
		}},
		// (e) a turn promised to the process
		{"a turn promised to the process, its request standing (lapsed): takes it for at most its TTL", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenB)
			r.waitingAs(t, tokenA, "p1")
			r.rdb.HSet(ctx, r.k.Asks, "p1", tokenA+" 60000 1 1") // lapsed: a turn, not a grant
			got, err := r.mutexRelease(tokenB)
			ok(t, got, err, 1)
			r.heard(t, "turn:p1")
		}, land, acquired(1, 1)}, // the process's next attempt, with tokenA, finds it its own
		{"a turn promised to another process: refused, the promise stands", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, "turn:p2")
		}, func(t *testing.T, r *lateRig) (int64, error) {
			return r.mutexAsk(tokenA, "p1", false)
		}, func(t *testing.T, r *lateRig, reply int64) {
			wantRefused(t, reply)
			r.wantValue(t, r.k.Lock, "turn:p2")
			r.wantLong(t, r.k.Lock)
			r.wantValue(t, r.k.Fence, "<none>")
			r.wantNoAsk(t, "p1")
		}},
	})
}

// TestLateMutexExtend: a renewal or Extend of a Mutex (or FairMutex) lease that lands late.
func TestLateMutexExtend(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	land := func(t *testing.T, r *lateRig) (int64, error) { return extend(r.rdb, r.k, tokenA, lateTTL) }
	runLate(t, rdb, "mutex_extend", []late{
		{"after a longer extension: never shortens", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenA)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1)
			r.wantValue(t, r.k.Lock, tokenA)
			r.wantLong(t, r.k.Lock)
		}},
		{"its own key shorter (a grant's length): lengthened to at most its TTL", func(t *testing.T, r *lateRig) {
			r.rdb.Set(ctx, r.k.Lock, tokenA, grantLength)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1)
			r.wantPTTL(t, r.k.Lock, grantLength+time.Millisecond, lateTTL)
		}},
		{"after the release: changes nothing", nil, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			r.wantGone(t, r.k.Lock)
		}},
		{"after another holder took the key: changes nothing", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenB)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			r.wantValue(t, r.k.Lock, tokenB)
			r.wantLong(t, r.k.Lock)
		}},
		{"after the release promised the lock to a process: changes nothing", func(t *testing.T, r *lateRig) {
			r.rdb.Set(ctx, r.k.Lock, "turn:p2", 20*time.Second)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			r.wantValue(t, r.k.Lock, "turn:p2")
			r.wantPTTL(t, r.k.Lock, 1, 20*time.Second)
		}},
	})
}

// TestLateMemberExtend: a reader's or a Semaphore holder's renewal that lands late.
func TestLateMemberExtend(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	readerExt := func(t *testing.T, r *lateRig) (int64, error) {
		return MemberExtend.Run(ctx, r.rdb, memberExtendKeys(readerKeys(r.k), r.k), tokenA, lateTTL.Milliseconds()).Int64()
	}
	semExt := func(t *testing.T, r *lateRig) (int64, error) {
		return MemberExtend.Run(ctx, r.rdb, memberExtendKeys(holderKeys(r.k), r.k), tokenA, lateTTL.Milliseconds()).Int64()
	}
	// wantLongEnd fails unless member's lease end is still about otherLong away.
	wantLongEnd := func(t *testing.T, r *lateRig, key, member string) {
		t.Helper()
		if s, _ := r.score(t, key, member); int64(s) < r.now(t)+(otherLong-time.Minute).Milliseconds() {
			t.Fatalf("%s's lease end moved to %v: shortened", member, s)
		}
	}
	runLate(t, rdb, "member_extend", []late{
		{"reader: after a longer extension: never shortens", func(t *testing.T, r *lateRig) {
			got, err := r.readAcquire(tokenA, "")
			ok(t, got, err, 1)
			r.rdb.ZAdd(ctx, r.k.Readers(), redis.Z{Score: float64(r.now(t) + otherLong.Milliseconds()), Member: tokenA})
			r.rdb.PExpire(ctx, r.k.Readers(), otherLong)
		}, readerExt, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1)
			wantLongEnd(t, r, r.k.Readers(), tokenA)
			r.wantLong(t, r.k.Readers())
		}},
		{"reader: after its release, another reads: not brought back, the other untouched", func(t *testing.T, r *lateRig) {
			got, err := r.readAcquire(tokenB, "")
			ok(t, got, err, 1)
		}, readerExt, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			if _, there := r.score(t, r.k.Readers(), tokenA); there {
				t.Fatal("the released reader is back")
			}
			r.wantEnds(t, r.k.Readers(), tokenB, lateTTL)
		}},
		{"reader: after its lease ended, not yet pruned: not brought back", func(t *testing.T, r *lateRig) {
			r.rdb.ZAdd(ctx, r.k.Readers(), redis.Z{Score: float64(r.now(t) - 1), Member: tokenA})
		}, readerExt, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			if s, _ := r.score(t, r.k.Readers(), tokenA); int64(s) > r.now(t) {
				t.Fatalf("the ended lease moved to %v", s)
			}
		}},
		{"Semaphore: after a longer extension: never shortens", func(t *testing.T, r *lateRig) {
			got, err := r.semAcquire(tokenA, 1, "w1", false)
			ok(t, got, err, 1)
			r.rdb.ZAdd(ctx, r.k.Lock, redis.Z{Score: float64(r.now(t) + otherLong.Milliseconds()), Member: tokenA})
			r.rdb.PExpire(ctx, r.k.Lock, otherLong)
			r.rdb.PExpire(ctx, r.k.Permits(), otherLong)
		}, semExt, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1)
			wantLongEnd(t, r, r.k.Lock, tokenA)
			r.wantLong(t, r.k.Lock)
			r.wantLong(t, r.k.Permits())
		}},
		{"Semaphore: after its release, another holds the permits: changes nothing", func(t *testing.T, r *lateRig) {
			got, err := r.semAcquire(tokenB, semSize, "w0", false)
			ok(t, got, err, 1)
		}, semExt, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			if _, there := r.score(t, r.k.Lock, tokenA); there {
				t.Fatal("the released holder is back")
			}
			if r.rdb.HExists(ctx, r.k.Permits(), tokenA).Val() {
				t.Fatal("the released holder's permits are back")
			}
			r.wantEnds(t, r.k.Lock, tokenB, lateTTL)
			if n := r.rdb.HGet(ctx, r.k.Permits(), tokenB).Val(); n != strconv.Itoa(semSize) {
				t.Fatalf("the holder's permits = %q, want %d", n, semSize)
			}
		}},
	})
}

// TestLateMultiExtend: a MultiMutex renewal or Extend that lands late.
func TestLateMultiExtend(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	r := &lateRig{rdb: rdb}
	ext := func(a, b keyspace.Keys) (int64, error) {
		return runMultiExtend(rdb, []keyspace.Keys{a, b}, tokenA, lateTTL)
	}
	t.Run("after a longer extension: no key shortened", func(t *testing.T) {
		a, b := multiKeys(t, "late-mext-1")
		rdb.Set(ctx, a.Lock, tokenA, otherLong)
		rdb.Set(ctx, b.Lock, tokenA, otherLong)
		got, err := ext(a, b)
		must(t, got, err, 1)
		r.wantLong(t, a.Lock)
		r.wantLong(t, b.Lock)
	})
	t.Run("its own keys, one shorter: that one lengthened to at most its TTL, the other kept", func(t *testing.T) {
		a, b := multiKeys(t, "late-mext-2")
		rdb.Set(ctx, a.Lock, tokenA, otherLong)
		rdb.Set(ctx, b.Lock, tokenA, grantLength)
		got, err := ext(a, b)
		must(t, got, err, 1)
		r.wantLong(t, a.Lock)
		r.wantPTTL(t, b.Lock, grantLength+time.Millisecond, lateTTL)
	})
	t.Run("after the release: changes nothing", func(t *testing.T) {
		a, b := multiKeys(t, "late-mext-3")
		got, err := ext(a, b)
		must(t, got, err, 0)
		r.wantGone(t, a.Lock)
		r.wantGone(t, b.Lock)
	})
	t.Run("after another holder took one name: changes nothing, its other name not lengthened", func(t *testing.T) {
		a, b := multiKeys(t, "late-mext-4")
		rdb.Set(ctx, a.Lock, tokenB, otherLong)
		rdb.Set(ctx, b.Lock, tokenA, grantLength) // not yet released, on its way out
		got, err := ext(a, b)
		must(t, got, err, 0)
		r.wantValue(t, a.Lock, tokenB)
		r.wantLong(t, a.Lock)
		r.wantValue(t, b.Lock, tokenA)
		r.wantPTTL(t, b.Lock, 1, grantLength)
	})
	t.Run("after other holders took every name: changes nothing", func(t *testing.T) {
		a, b := multiKeys(t, "late-mext-5")
		rdb.Set(ctx, a.Lock, tokenB, otherLong)
		rdb.Set(ctx, b.Lock, tokenC, otherLong)
		got, err := ext(a, b)
		must(t, got, err, 0)
		r.wantValue(t, a.Lock, tokenB)
		r.wantValue(t, b.Lock, tokenC)
		r.wantLong(t, a.Lock)
		r.wantLong(t, b.Lock)
	})
}

// TestLateStampExtend: a TimestampMutex renewal or Extend that lands late. The hold
// acquired with deadline d0 as the attempt tokenA (the late call's ARGV[3]); the late
// call writes d1 and knows the deadlines owned.
func TestLateStampExtend(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	r := &lateRig{rdb: rdb}
	sent := time.Now().UnixMilli() - 10_000 // the late call's clock: 10s ago
	d0 := sent - 5_000 + lateTTL.Milliseconds()
	d1 := sent + lateTTL.Milliseconds()
	str := func(d int64) string { return strconv.FormatInt(d, 10) }

	t.Run("after a later extension wrote a later deadline: changes nothing", func(t *testing.T) {
		k := keys(t, "late:stampext:1")
		d2 := time.Now().UnixMilli() + otherLong.Milliseconds() // Extend(1h), sent after
		rdb.Set(ctx, k.Lock, str(d2), otherLong)
		got, err := runStampExtend(rdb, k, d1, lateTTL, tokenA, d0)
		must(t, got, err, 0)
		r.wantValue(t, k.Lock, str(d2))
		r.wantLong(t, k.Lock)
	})
	t.Run("after a longer Extend sent before it, among its owned: deadline and expiry kept", func(t *testing.T) {
		k := keys(t, "late:stampext:2")
		d2 := time.Now().UnixMilli() + otherLong.Milliseconds()
		rdb.Set(ctx, k.Lock, str(d2), otherLong)
		got, err := runStampExtend(rdb, k, d1, lateTTL, tokenA, d0, d2)
		must(t, got, err, 1)
		r.wantValue(t, k.Lock, str(d2))
		r.wantLong(t, k.Lock)
	})
	t.Run("its own earlier deadline, a shorter expiry: lengthened to at most its TTL", func(t *testing.T) {
		k := keys(t, "late:stampext:3")
		rdb.Set(ctx, k.Lock, str(d0), grantLength)
		got, err := runStampExtend(rdb, k, d1, lateTTL, tokenA, d0)
		must(t, got, err, 1)
		r.wantValue(t, k.Lock, str(d1))
		r.wantPTTL(t, k.Lock, grantLength+time.Millisecond, lateTTL)
	})
	t.Run("after the release: changes nothing", func(t *testing.T) {
		k := keys(t, "late:stampext:4")
		got, err := runStampExtend(rdb, k, d1, lateTTL, tokenA, d0)
		must(t, got, err, 0)
		r.wantGone(t, k.Lock)
	})
	t.Run("after another client took the key: changes nothing", func(t *testing.T) {
		k := keys(t, "late:stampext:5")
		theirs := str(time.Now().UnixMilli() + 30_000)
		rdb.Set(ctx, k.Lock, theirs, 0) // GETSET drops the expiry
		got, err := runStampExtend(rdb, k, d1, lateTTL, tokenA, d0)
		must(t, got, err, 0)
		r.wantValue(t, k.Lock, theirs)
		if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl != -1 {
			t.Fatalf("PTTL = %v, want none (as the other client left it)", pttl)
		}
	})
	t.Run("after another dlock hold took the key: changes nothing", func(t *testing.T) {
		k := keys(t, "late:stampext:6")
		theirs := str(time.Now().UnixMilli() + otherLong.Milliseconds())
		rdb.Set(ctx, k.Lock, theirs, otherLong)
		got, err := runStampExtend(rdb, k, d1, lateTTL, tokenA, d0)
		must(t, got, err, 0)
		r.wantValue(t, k.Lock, theirs)
		r.wantLong(t, k.Lock)
	})
}

// The FairMutex scripts' calls, as the engine makes them.

func (r *lateRig) fairAcquire(token string) (int64, error) {
	return FairAcquire.Run(ctx, r.rdb, fairKeys(r.k), token, lateTTL.Milliseconds(), lateLife.Milliseconds(), "0").Int64()
}

// fairRelease is fair_release.lua in mode "release" or "leave".
func (r *lateRig) fairRelease(token, mode string) (int64, error) {
	return FairRelease.Run(ctx, r.rdb, fairKeys(r.k), token, grantLength.Milliseconds(), r.k.GrantedPrefix(), "PUBLISH", mode).Int64()
}

// fairWaiting queues token behind the key's holder.
func (r *lateRig) fairWaiting(t *testing.T, token string) {
	t.Helper()
	if got, err := r.fairAcquire(token); err != nil || got > 0 {
		t.Fatalf("attempt on a held fair mutex: %d, %v; want a refusal", got, err)
	}
}

// listen subscribes the rig also to the waiters' channels of tokens, where a hand-over
// is told; quiet then covers them too.
func (r *lateRig) listen(t *testing.T, tokens ...string) {
	t.Helper()
	for _, tok := range tokens {
		if err := r.ps.Subscribe(ctx, r.k.GrantedPrefix()+tok); err != nil {
			t.Fatal(err)
		}
		confirmedAlso(t, r.ps)
	}
}

// handedTo fails unless the next message is the hand-over of the lock to token with fence.
func (r *lateRig) handedTo(t *testing.T, token string, fence int) {
	t.Helper()
	receive(t, r.ps, r.k.GrantedPrefix()+token, fmt.Sprintf("grant:%s:%s:%d:1", token, token, fence))
}

// wantServed fails unless token is a holder token's tombstone of the lock that dies
// GONE_MS after a lease of lease from now would end (wantTombstoneFor).
func (r *lateRig) wantServed(t *testing.T, token string, lease time.Duration) {
	t.Helper()
	wantTombstoneFor(t, r.rdb, r.k.Gone, token, lease)
}

// wantWaiterGone fails unless waiter is a tombstone in deadlines that dies within GONE_MS
// (wantWaiterTombstone).
func (r *lateRig) wantWaiterGone(t *testing.T, deadlines, waiter string) {
	t.Helper()
	wantWaiterTombstone(t, r.rdb, deadlines, waiter)
}

// TestLateFairAcquire: a FairMutex attempt that lands late.
func TestLateFairAcquire(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	land := func(t *testing.T, r *lateRig) (int64, error) { return r.fairAcquire(tokenA) }
	// granted: tokenB held, tokenA waited, tokenB's release handed it the lock.
	granted := func(t *testing.T, r *lateRig) {
		t.Helper()
		r.listen(t, tokenA)
		got, err := r.fairAcquire(tokenB)
		ok(t, got, err, 1)
		r.fairWaiting(t, tokenA)
		got, err = r.fairRelease(tokenB, "release")
		ok(t, got, err, 1)
		r.handedTo(t, tokenA, 2)
	}
	servedAndReleased := func(t *testing.T, r *lateRig) {
		t.Helper()
		granted(t, r)
		got, err := r.fairRelease(tokenA, "release")
		ok(t, got, err, 1)
	}
	leftBehind := func(t *testing.T, r *lateRig) {
		t.Helper()
		r.setLong(t, r.k.Lock, tokenB)
		r.fairWaiting(t, tokenA)
		got, err := r.fairRelease(tokenA, "leave")
		ok(t, got, err, 1)
	}
	// gone: the attempt was refused as gone and wrote nothing: the key as holder left it
	// ("" for free), nothing queued or published; tokenA's tombstones as a waiter, and as
	// a holder for the lease it was handed the lock for (lease < 0: it never held it).
	gone := func(holder string, lease time.Duration) func(t *testing.T, r *lateRig, reply int64) {
		return func(t *testing.T, r *lateRig, reply int64) {
			wantGoneReply(t, reply)
			r.wantList(t, r.k.Queue())
			r.wantWaiterGone(t, r.k.QueueDeadlines(), tokenA)
			if lease >= 0 {
				r.wantServed(t, tokenA, lease)
			} else {
				wantNoTombstone(t, r.rdb, r.k.Gone, tokenA) // a waiter that left without the lock
			}
			if holder == "" {
				r.wantGone(t, r.k.Lock)
			} else {
				r.wantValue(t, r.k.Lock, holder)
				r.wantLong(t, r.k.Lock)
			}
			r.quiet(t)
		}
	}
	runLate(t, rdb, "fair_acquire", []late{
		{"after it was granted and released, free: gone, nothing queued or taken", servedAndReleased, land, gone("", grantLength)},
		{"after it was granted and released, another holds: gone, the holder untouched", func(t *testing.T, r *lateRig) {
			servedAndReleased(t, r)
			r.setLong(t, r.k.Lock, tokenC)
		}, land, gone(tokenC, grantLength)},
		{"after its leave, held: gone, not queued", leftBehind, land, gone(tokenB, -1)},
		{"after its leave, free: gone, nothing taken", func(t *testing.T, r *lateRig) {
			leftBehind(t, r)
			r.rdb.Del(ctx, r.k.Lock)
		}, land, gone("", -1)},
		{"after it was granted and released, its waiter's tombstone died (GONE_MS passed), free: gone by its holder's, nothing taken", func(t *testing.T, r *lateRig) {
			servedAndReleased(t, r)
			r.rdb.ZRem(ctx, r.k.QueueDeadlines(), tokenA)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			wantGoneReply(t, reply)
			r.wantGone(t, r.k.Lock)
			r.wantList(t, r.k.Queue())
			r.wantNotListed(t, r.k.QueueDeadlines(), tokenA)
			r.wantServed(t, tokenA, grantLength)
			r.quiet(t)
		}},
		{"after it was granted and released, both its tombstones died, free: as on time, the lock for at most its TTL", func(t *testing.T, r *lateRig) {
			servedAndReleased(t, r)
			r.waiterTombstoneDied(t, r.k.QueueDeadlines(), tokenA) // the attempt is more than the
			killTombstone(t, r.rdb, r.k.Gone, tokenA)              // hand-over's length and GONE_MS late
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 3)
			r.wantValue(t, r.k.Lock, tokenA)
			r.wantPTTL(t, r.k.Lock, 1, lateTTL)
			r.wantWaiterGone(t, r.k.QueueDeadlines(), tokenA)
			r.wantServed(t, tokenA, lateTTL)
		}},
		{"after the grant, while it holds (extended): only lengthens", func(t *testing.T, r *lateRig) {
			granted(t, r)
			r.rdb.PExpire(ctx, r.k.Lock, otherLong)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 2) // the grant's fencing token: no INCR
			r.wantValue(t, r.k.Lock, tokenA)
			r.wantLong(t, r.k.Lock)
			r.wantValue(t, r.k.Fence, "2")
			r.wantServed(t, tokenA, lateTTL) // held: kept a tombstone for its TTL
		}},
		{"after the grant, not yet confirmed (a hand-over's length): lengthened to at most its TTL", granted, land,
			func(t *testing.T, r *lateRig, reply int64) {
				ok(t, reply, nil, 2)
				r.wantValue(t, r.k.Lock, tokenA)
				r.wantPTTL(t, r.k.Lock, grantLength+time.Millisecond, lateTTL)
				r.wantList(t, r.k.Queue())
				r.wantServed(t, tokenA, lateTTL)
			}},
		{"a copy landing twice while waiting: one entry", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenB)
			r.fairWaiting(t, tokenC)
			r.fairWaiting(t, tokenA)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			wantRefused(t, reply)
			r.wantList(t, r.k.Queue(), tokenC, tokenA)
			r.wantEnds(t, r.k.QueueDeadlines(), tokenA, lateLife)
			r.wantValue(t, r.k.Lock, tokenB)
			r.wantLong(t, r.k.Lock)
		}},
		{"after its tombstone died, free: as on time, the lock for at most its TTL", func(t *testing.T, r *lateRig) {
			r.waiterTombstoneDied(t, r.k.QueueDeadlines(), tokenA)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1)
			r.wantValue(t, r.k.Lock, tokenA)
			r.wantPTTL(t, r.k.Lock, 1, lateTTL)
			r.wantWaiterGone(t, r.k.QueueDeadlines(), tokenA)
			r.wantServed(t, tokenA, lateTTL)
		}},
		{"after its tombstone died, held: as on time, queued for at most an entry's life", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenB)
			r.waiterTombstoneDied(t, r.k.QueueDeadlines(), tokenA)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			wantRefused(t, reply)
			r.wantList(t, r.k.Queue(), tokenA)
			r.wantEnds(t, r.k.QueueDeadlines(), tokenA, lateLife)
			r.wantPTTL(t, r.k.Queue(), 1, lateLife)
		}},
	})
}

// TestLateFairRelease: a FairMutex release, or a waiter's leave, that lands late.
func TestLateFairRelease(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	rel := func(t *testing.T, r *lateRig) (int64, error) { return r.fairRelease(tokenA, "release") }
	leave := func(t *testing.T, r *lateRig) (int64, error) { return r.fairRelease(tokenA, "leave") }
	// aGranted: tokenB held, tokenA and tokenC waited, tokenB's release handed tokenA the lock.
	aGranted := func(t *testing.T, r *lateRig) {
		t.Helper()
		r.listen(t, tokenA, tokenB, tokenC)
		got, err := r.fairAcquire(tokenB)
		ok(t, got, err, 1)
		r.fairWaiting(t, tokenA)
		r.fairWaiting(t, tokenC)
		got, err = r.fairRelease(tokenB, "release")
		ok(t, got, err, 1)
		r.handedTo(t, tokenA, 2)
	}
	runLate(t, rdb, "fair_release", []late{
		{"a release after the next waiter took the key: changes nothing, publishes nothing", func(t *testing.T, r *lateRig) {
			r.listen(t, tokenA, tokenB)
			got, err := r.fairAcquire(tokenA)
			ok(t, got, err, 1)
			r.fairWaiting(t, tokenB)
			got, err = r.fairRelease(tokenA, "release") // on time
			ok(t, got, err, 1)
			r.handedTo(t, tokenB, 2)
			r.rdb.PExpire(ctx, r.k.Lock, otherLong) // tokenB renewed
		}, rel, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			r.wantValue(t, r.k.Lock, tokenB)
			r.wantLong(t, r.k.Lock)
			r.wantValue(t, r.k.Fence, "2")
			r.wantServed(t, tokenA, lateTTL)     // as its acquisition left it
			r.wantServed(t, tokenB, grantLength) // handed over
			r.quiet(t)
		}},
		{"a release after the key expired and another took it, a waiter queued: changes nothing", func(t *testing.T, r *lateRig) {
			r.listen(t, tokenC)
			r.setLong(t, r.k.Lock, tokenB)
			r.fairWaiting(t, tokenC)
		}, rel, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			r.wantValue(t, r.k.Lock, tokenB)
			r.wantLong(t, r.k.Lock)
			r.wantList(t, r.k.Queue(), tokenC)
			r.wantEnds(t, r.k.QueueDeadlines(), tokenC, lateLife)
			r.quiet(t)
		}},
		{"a leave after the waiter was served and released: its tombstone only, the holder untouched", func(t *testing.T, r *lateRig) {
			aGranted(t, r)
			got, err := r.fairRelease(tokenA, "release") // tokenA held and released
			ok(t, got, err, 1)
			r.handedTo(t, tokenC, 3)
			r.rdb.PExpire(ctx, r.k.Lock, otherLong)
		}, leave, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1)
			r.wantValue(t, r.k.Lock, tokenC)
			r.wantLong(t, r.k.Lock)
			r.wantValue(t, r.k.Fence, "3")
			r.wantList(t, r.k.Queue())
			r.wantWaiterGone(t, r.k.QueueDeadlines(), tokenA)
			r.wantWaiterGone(t, r.k.QueueDeadlines(), tokenC)
			r.wantServed(t, tokenA, grantLength) // not shortened by the leave
			r.wantServed(t, tokenC, grantLength)
			r.quiet(t)
		}},
		{"a leave after the waiter was served, others queued behind the holder: they keep their places", func(t *testing.T, r *lateRig) {
			r.listen(t, tokenA, tokenB)
			got, err := r.fairAcquire(tokenA)
			ok(t, got, err, 1)
			r.fairWaiting(t, tokenB)
			got, err = r.fairRelease(tokenA, "release")
			ok(t, got, err, 1)
			r.handedTo(t, tokenB, 2)
			r.fairWaiting(t, tokenC)
			r.fairWaiting(t, tokenC+"x")
		}, leave, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1)
			r.wantValue(t, r.k.Lock, tokenB)
			r.wantList(t, r.k.Queue(), tokenC, tokenC+"x")
			r.wantEnds(t, r.k.QueueDeadlines(), tokenC, lateLife)
			r.wantEnds(t, r.k.QueueDeadlines(), tokenC+"x", lateLife)
			r.wantWaiterGone(t, r.k.QueueDeadlines(), tokenA)
			r.quiet(t)
		}},
		{"a leave when the lock was granted to the leaving waiter: passes it on", aGranted, leave,
			func(t *testing.T, r *lateRig, reply int64) {
				ok(t, reply, nil, 1)
				r.handedTo(t, tokenC, 3)
				r.wantValue(t, r.k.Lock, tokenC)
				r.wantPTTL(t, r.k.Lock, 1, grantLength)
				r.wantList(t, r.k.Queue())
				r.wantWaiterGone(t, r.k.QueueDeadlines(), tokenA)
				r.wantServed(t, tokenA, grantLength)
				r.wantServed(t, tokenC, grantLength)
				r.quiet(t)
			}},
		{"a leave when the lock was granted to the leaving waiter, no one else waits: freed", func(t *testing.T, r *lateRig) {
			r.listen(t, tokenA)
			got, err := r.fairAcquire(tokenB)
			ok(t, got, err, 1)
			r.fairWaiting(t, tokenA)
			got, err = r.fairRelease(tokenB, "release")
			ok(t, got, err, 1)
			r.handedTo(t, tokenA, 2)
		}, leave, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1)
			r.wantGone(t, r.k.Lock)
			r.wantWaiterGone(t, r.k.QueueDeadlines(), tokenA)
			r.quiet(t)
		}},
	})
}

// TestLateMutexServedOrLeftTokenNeverTakesFreeLock: a Mutex attempt of a standing request
// whose token was served or left (a tombstone, a key of its own: gone.lua), landing
// when the key is free, takes nothing: the leave, or the release of the served token's
// hold, landed before it, so nothing would undo it, and taking it would take the process
// out of the turns, deleting a newer request of the process.
func TestLateMutexServedOrLeftTokenNeverTakesFreeLock(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	// wantNothingTaken fails unless the late attempt was refused as gone, and the key is
	// free with the counter at fence, tokenA a tombstone as it was served, for lease.
	wantNothingTaken := func(t *testing.T, r *lateRig, got int64, err error, fence string, lease time.Duration) {
		t.Helper()
		if err != nil || !Gone(got) {
			t.Fatalf("late attempt = %d, %v; want the gone reply", got, err)
		}
		r.wantGone(t, r.k.Lock)
		r.wantValue(t, r.k.Fence, fence)
		r.wantServed(t, tokenA, lease)
	}
	t.Run("after its leave", func(t *testing.T) {
		r := &lateRig{rdb: rdb, k: keys(t, "finding:mutex-done:1")}
		r.setLong(t, r.k.Lock, tokenB)
		r.waitingAs(t, tokenA, "p1")
		got, err := r.mutexLeave("p1", tokenA) // p1 gives up
		must(t, got, err, 0)
		r.rdb.Del(ctx, r.k.Lock)                  // the holder's lease ran out
		got, err = r.mutexAsk(tokenA, "p1", true) // p1's attempt, landing late
		wantNothingTaken(t, r, got, err, "<none>", 0)
		r.wantNoAsk(t, "p1")
	})
	t.Run("after its request was granted, used and released", func(t *testing.T) {
		r := &lateRig{rdb: rdb, k: keys(t, "finding:mutex-done:2")}
		r.setLong(t, r.k.Lock, tokenB)
		r.waitingAs(t, tokenA, "p1")
		got, err := r.mutexRelease(tokenB) // grants p1's request
		must(t, got, err, 1)
		got, err = r.mutexAsk(tokenA, "p1", true) // p1 confirms, holds, releases
		must(t, got, err, 2)
		got, err = r.mutexRelease(tokenA)
		must(t, got, err, 1)
		got, err = r.mutexAsk(tokenA, "p1", true) // an earlier attempt of it, landing late
		wantNothingTaken(t, r, got, err, "2", lateTTL)
		r.wantNoAsk(t, "p1")
	})
	t.Run("after its leave, a newer request of the process stands", func(t *testing.T) {
		r := &lateRig{rdb: rdb, k: keys(t, "finding:mutex-done:3")}
		r.setLong(t, r.k.Lock, tokenB)
		r.waitingAs(t, tokenA, "p1")
		got, err := r.mutexLeave("p1", tokenA)
		must(t, got, err, 0)
		r.waitingAs(t, tokenC, "p1") // a newer waiter of p1
		r.rdb.Del(ctx, r.k.Lock)     // the holder's lease ran out
		got, err = r.mutexAsk(tokenA, "p1", true)
		wantNothingTaken(t, r, got, err, "<none>", 0)
		r.wantList(t, r.k.Turns, "p1") // the newer waiter keeps its request and place
		r.wantAsk(t, "p1", tokenC)
	})
}

// TestLateMutexLeftTokenNeverTakesTurn: likewise, a turn promised to the process (to a
// newer waiter of it, whose request lapsed) is not taken by a late attempt of a request
// that left: the newer waiter, asking with its own token, would be refused until that
// attempt's lease ran out.
func TestLateMutexLeftTokenNeverTakesTurn(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	r := &lateRig{rdb: rdb, k: keys(t, "finding:mutex-turn")}
	r.setLong(t, r.k.Lock, tokenB)
	r.waitingAs(t, tokenA, "p1")
	got, err := r.mutexLeave("p1", tokenA) // p1's first waiter gives up
	must(t, got, err, 0)
	r.waitingAs(t, tokenC, "p1")                         // a newer waiter of p1
	r.rdb.HSet(ctx, r.k.Asks, "p1", tokenC+" 60000 1 1") // its request lapsed
	got, err = r.mutexRelease(tokenB)                    // promises p1 the turn
	must(t, got, err, 1)
	got, err = r.mutexAsk(tokenA, "p1", true) // the first waiter's attempt, landing late
	if err != nil || !Gone(got) {
		t.Fatalf("late attempt = %d, %v; want the gone reply", got, err)
	}
	r.wantValue(t, r.k.Lock, "turn:p1")
	r.wantPTTL(t, r.k.Lock, 1, 20*time.Second)
	r.wantValue(t, r.k.Fence, "<none>")
	r.wantNoAsk(t, "p1")                      // the promise took p1 off the turns: the turn is what it has
	got, err = r.mutexAsk(tokenC, "p1", true) // the newer waiter takes its turn
	must(t, got, err, 1)
	r.wantValue(t, r.k.Lock, tokenC)
	r.wantNoAsk(t, "p1")
}
