package scripts

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// The late landings: each script's call replayed after its caller gave up and after the
// later calls of the same process, against each state that can follow it, asserting what
// the script's "Late:" line says. Tokens: tokenA is the late call's, tokenB and tokenC
// belong to later holders (another process, or this process's later attempt, which always
// has a fresh token).

const (
	lateTTL   = 60 * time.Second // the late call's lease length
	lateLife  = 3 * time.Second  // a wait entry's life
	tokenC    = "cccccccccccccccccccccccccccccccc"
	otherLong = time.Hour // a later holder's lease, extended: a late call must not shorten it
)

// late is one late landing: set up the state that followed the call, land the call, check.
type late struct {
	name  string
	state func(t *testing.T, r *lateRig)
	land  func(t *testing.T, r *lateRig) (int64, error)
	check func(t *testing.T, r *lateRig, reply int64)
}

// lateRig is one case's lock: its keys, a client and a subscription to its channel.
type lateRig struct {
	rdb *redis.Client
	k   keyspace.Keys
	ps  *redis.PubSub
}

func runLate(t *testing.T, rdb *redis.Client, script string, cases []late) {
	t.Helper()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := &lateRig{rdb: rdb, k: keys(t, fmt.Sprintf("late:%s:%d", script, i))}
			r.ps = confirmed(t, rdb.Subscribe(ctx, r.k.Channel))
			if c.state != nil {
				c.state(t, r)
			}
			reply, err := c.land(t, r)
			if err != nil {
				t.Fatalf("late %s: %v", script, err)
			}
			c.check(t, r, reply)
		})
	}
}

// quiet fails unless nothing was published on the lock's channel since the last message.
func (r *lateRig) quiet(t *testing.T) {
	t.Helper()
	if err := r.rdb.Publish(ctx, r.k.Channel, "marker").Err(); err != nil {
		t.Fatal(err)
	}
	receive(t, r.ps, r.k.Channel, "marker")
}

// heard fails unless payload is the next message on the lock's channel.
func (r *lateRig) heard(t *testing.T, payload string) {
	t.Helper()
	receive(t, r.ps, r.k.Channel, payload)
}

func (r *lateRig) wantValue(t *testing.T, key, want string) {
	t.Helper()
	got, err := r.rdb.Get(ctx, key).Result()
	if err == redis.Nil {
		got = "<none>"
	} else if err != nil {
		t.Fatal(err)
	}
	if got != want {
		t.Fatalf("%s = %q, want %q", key, got, want)
	}
}

func (r *lateRig) wantGone(t *testing.T, key string) {
	t.Helper()
	if n := r.rdb.Exists(ctx, key).Val(); n != 0 {
		t.Fatalf("%s exists (%s), want it gone", key, r.rdb.Type(ctx, key).Val())
	}
}

// wantPTTL fails unless key's PTTL is in [min, max].
func (r *lateRig) wantPTTL(t *testing.T, key string, min, max time.Duration) {
	t.Helper()
	if got := r.rdb.PTTL(ctx, key).Val(); got < min || got > max {
		t.Fatalf("PTTL %s = %v, want in [%v, %v]", key, got, min, max)
	}
}

// wantLong fails unless key still has about otherLong left: not shortened.
func (r *lateRig) wantLong(t *testing.T, key string) {
	t.Helper()
	r.wantPTTL(t, key, otherLong-time.Minute, otherLong)
}

func (r *lateRig) now(t *testing.T) int64 {
	t.Helper()
	tm, err := r.rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return tm.UnixMilli()
}

// score is member's score in key, and whether it is there.
func (r *lateRig) score(t *testing.T, key, member string) (float64, bool) {
	t.Helper()
	s, err := r.rdb.ZScore(ctx, key, member).Result()
	if err == redis.Nil {
		return 0, false
	}
	if err != nil {
		t.Fatal(err)
	}
	return s, true
}

// wantEnds fails unless member's score in key is a lease end or entry deadline within d
// from now (Redis time): taken for no longer than that.
func (r *lateRig) wantEnds(t *testing.T, key, member string, d time.Duration) {
	t.Helper()
	s, ok := r.score(t, key, member)
	now := r.now(t)
	if !ok || int64(s) <= now || int64(s) > now+d.Milliseconds() {
		t.Fatalf("%s %s = %v (there: %v), want in (now, now+%v], now %d", key, member, s, ok, d, now)
	}
}

// wantNotListed fails if member is in key with a live (positive) score.
func (r *lateRig) wantNotListed(t *testing.T, key, member string) {
	t.Helper()
	if s, ok := r.score(t, key, member); ok && s > 0 {
		t.Fatalf("%s lists %s (score %v): a late call brought it back", key, member, s)
	}
}

// waiterTombstoneDied makes waiter's tombstone in a wait list's deadlines one that died a
// moment ago (gone.lua): the set as a call finds it that lands more than GONE_MS after the
// waiter was served or left. (A holder token's tombstone dies by killTombstone.)
func (r *lateRig) waiterTombstoneDied(t *testing.T, deadlines, waiter string) {
	t.Helper()
	if err := r.rdb.ZAdd(ctx, deadlines, redis.Z{Score: -float64(r.now(t) - 1), Member: waiter}).Err(); err != nil {
		t.Fatal(err)
	}
}

func (r *lateRig) wantList(t *testing.T, key string, want ...string) {
	t.Helper()
	if got := r.rdb.LRange(ctx, key, 0, -1).Val(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("%s = %v, want %v", key, got, want)
	}
}

// wantGoneReply fails unless reply is gone.lua's: the waiter's id was served or left.
func wantGoneReply(t *testing.T, reply int64) {
	t.Helper()
	if !Gone(reply) {
		t.Fatalf("reply %d, want the gone reply", reply)
	}
}

func wantRefused(t *testing.T, reply int64) {
	t.Helper()
	if reply > 0 {
		t.Fatalf("reply %d: acquired, want a refusal", reply)
	}
}

// The scripts' calls, as the engine makes them.

func (r *lateRig) readAcquire(token, owner string) (int64, error) {
	return RwReadAcquire.Run(ctx, r.rdb, rwKeys(r.k), token, lateTTL.Milliseconds(), owner).Int64()
}

func (r *lateRig) writeAcquire(token, waiter string, try bool) (int64, error) {
	return writeAcquireFor(r.rdb, r.k, token, lateTTL, waiter, try)
}

// writeAcquireFor runs rw_write_acquire.lua on one server (a served writer's id is
// tombstoned) for a lease of ttl, with wait entries of lateLife.
func writeAcquireFor(rdb redis.Scripter, k keyspace.Keys, token string, ttl time.Duration, waiter string, try bool) (int64, error) {
	return RwWriteAcquire.Run(ctx, rdb, rwKeys(k), token, ttl.Milliseconds(), waiter, lateLife.Milliseconds(), flag(try), "1").Int64()
}

func (r *lateRig) leaveWriters(waiter string) (int64, error) {
	return WaiterLeave.Run(ctx, r.rdb, writerLeaveKeys(r.k), waiter, r.k.Channel, "PUBLISH").Int64()
}

func (r *lateRig) readRelease(token string) (int64, error) {
	return MemberRelease.Run(ctx, r.rdb, readerKeys(r.k), token, r.k.Channel, "PUBLISH").Int64()
}

const semSize = 2

func (r *lateRig) semAcquire(token string, n int, waiter string, try bool) (int64, error) {
	k := r.k
	return SemaphoreAcquire.Run(ctx, r.rdb, semaphoreKeys(k),
		token, lateTTL.Milliseconds(), semSize, n, waiter, lateLife.Milliseconds(), flag(try), k.Channel, "PUBLISH").Int64()
}

func (r *lateRig) semLeave(waiter string) (int64, error) {
	return WaiterLeave.Run(ctx, r.rdb, queueLeaveKeys(r.k), waiter, r.k.Channel, "PUBLISH").Int64()
}

func (r *lateRig) semRelease(token string) (int64, error) {
	return MemberRelease.Run(ctx, r.rdb, holderKeys(r.k), token, r.k.Channel, "PUBLISH").Int64()
}

// setLong makes key hold value with otherLong left: a later holder that extended its lease.
func (r *lateRig) setLong(t *testing.T, key, value string) {
	t.Helper()
	if err := r.rdb.Set(ctx, key, value, otherLong).Err(); err != nil {
		t.Fatal(err)
	}
}

func ok(t *testing.T, got int64, err error, want int64) {
	t.Helper()
	must(t, got, err, want)
}

// TestLateRWReadAcquire: a reader's attempt that lands late.
func TestLateRWReadAcquire(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	land := func(t *testing.T, r *lateRig) (int64, error) { return r.readAcquire(tokenA, "") }
	runLate(t, rdb, "rw_read_acquire", []late{
		{"after its undo, free: a read lock until its own TTL", func(t *testing.T, r *lateRig) {
			got, err := r.readRelease(tokenA)
			ok(t, got, err, 0)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1)
			r.wantEnds(t, r.k.Readers(), tokenA, lateTTL)
			r.wantPTTL(t, r.k.Readers(), 1, lateTTL)
		}},
		{"after a writer took the lock: refused, the writer's key untouched", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenB)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			wantRefused(t, reply)
			r.wantValue(t, r.k.Lock, tokenB)
			r.wantLong(t, r.k.Lock)
			r.wantGone(t, r.k.Readers())
		}},
		{"after a writer queued: refused, the writer still waits", func(t *testing.T, r *lateRig) {
			got, err := r.readAcquire(tokenC, "")
			ok(t, got, err, 1)
			if got, err := r.writeAcquire(tokenB, "w", false); err != nil || got > 0 {
				t.Fatalf("writer behind a reader: %d, %v", got, err)
			}
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			wantRefused(t, reply)
			r.wantEnds(t, r.k.Writers(), "w", lateLife)
			if _, there := r.score(t, r.k.Readers(), tokenA); there {
				t.Fatal("the late reader got in ahead of a waiting writer")
			}
		}},
		{"beside a live reader that extended: its lease untouched", func(t *testing.T, r *lateRig) {
			r.rdb.ZAdd(ctx, r.k.Readers(), redis.Z{Score: float64(r.now(t) + otherLong.Milliseconds()), Member: tokenB})
			r.rdb.PExpire(ctx, r.k.Readers(), otherLong)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1)
			r.wantEnds(t, r.k.Readers(), tokenB, otherLong)
			if s, _ := r.score(t, r.k.Readers(), tokenB); int64(s) < r.now(t)+(otherLong-time.Minute).Milliseconds() {
				t.Fatalf("the live reader's lease end moved to %v", s)
			}
			r.wantLong(t, r.k.Readers())
		}},
		{"a downgrade after its write lease ended and another writer took it: refused", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenC)
		}, func(t *testing.T, r *lateRig) (int64, error) {
			return r.readAcquire(tokenA, tokenB)
		}, func(t *testing.T, r *lateRig, reply int64) {
			wantRefused(t, reply)
			r.wantValue(t, r.k.Lock, tokenC)
			r.wantLong(t, r.k.Lock)
		}},
		{"a copy after itself landed: nothing changes", func(t *testing.T, r *lateRig) {
			got, err := r.readAcquire(tokenA, "")
			ok(t, got, err, 1)
			r.rdb.ZAdd(ctx, r.k.Readers(), redis.Z{Score: float64(r.now(t) + otherLong.Milliseconds()), Member: tokenA})
			r.rdb.PExpire(ctx, r.k.Readers(), otherLong)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1) // the fence of the first landing: no INCR
			r.wantEnds(t, r.k.Readers(), tokenA, otherLong)
			r.wantLong(t, r.k.Readers())
			r.wantValue(t, r.k.Fence, "1")
		}},
		{"after a writer left: its tombstone keeps no reader out", func(t *testing.T, r *lateRig) {
			got, err := r.readAcquire(tokenC, "")
			ok(t, got, err, 1)
			if got, err := r.writeAcquire(tokenB, "w", false); err != nil || got > 0 {
				t.Fatalf("writer behind a reader: %d, %v", got, err)
			}
			got, err = r.leaveWriters("w")
			ok(t, got, err, 1)
			r.heard(t, "left")
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 2)
			r.quiet(t)
		}},
	})
}

// TestLateRWWriteAcquire: a writer's attempt that lands late. The writer's id ("w") is its
// request's; its token is the attempt's.
func TestLateRWWriteAcquire(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	land := func(t *testing.T, r *lateRig) (int64, error) { return r.writeAcquire(tokenA, "w", false) }
	gaveUp := func(t *testing.T, r *lateRig) {
		t.Helper()
		got, err := release(r.rdb, r.k, tokenA, "") // the undo: found nothing
		ok(t, got, err, 0)
		if _, err := r.leaveWriters("w"); err != nil {
			t.Fatal(err)
		}
	}
	runLate(t, rdb, "rw_write_acquire", []late{
		{"after its undo and leave, held by another writer: refused, not listed", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenB)
			if got, err := r.writeAcquire(tokenA, "w", false); err != nil || got > 0 { // an on-time attempt lists w
				t.Fatalf("writer behind a writer: %d, %v", got, err)
			}
			gaveUp(t, r)
			r.heard(t, "left")
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			wantRefused(t, reply)
			r.wantNotListed(t, r.k.Writers(), "w")
			r.wantValue(t, r.k.Lock, tokenB)
			r.wantLong(t, r.k.Lock)
			// Once the writer is done, readers are not kept out by the writer that left.
			r.rdb.Del(ctx, r.k.Lock)
			got, err := r.readAcquire(tokenC, "")
			if err != nil || got <= 0 {
				t.Fatalf("reader after the writer left: %d, %v; want it in", got, err)
			}
		}},
		{"after its undo and leave, readers hold: refused, not listed", func(t *testing.T, r *lateRig) {
			got, err := r.readAcquire(tokenB, "")
			ok(t, got, err, 1)
			gaveUp(t, r)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			wantRefused(t, reply)
			r.wantNotListed(t, r.k.Writers(), "w")
			got, err := r.readAcquire(tokenC, "")
			ok(t, got, err, 2) // new readers still get in
		}},
		{"after its undo and leave, free: refused as gone, nothing taken", gaveUp, land, func(t *testing.T, r *lateRig, reply int64) {
			wantGoneReply(t, reply)
			r.wantGone(t, r.k.Lock)
			r.wantNotListed(t, r.k.Writers(), "w")
		}},
		{"a copy after its own hold was extended: the key is not shortened", func(t *testing.T, r *lateRig) {
			got, err := r.writeAcquire(tokenA, "w", false)
			ok(t, got, err, 1)
			r.rdb.PExpire(ctx, r.k.Lock, otherLong)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1)
			r.wantValue(t, r.k.Lock, tokenA)
			r.wantLong(t, r.k.Lock)
			r.wantValue(t, r.k.Fence, "1")
		}},
		{"after the process's next writer holds the lock: refused, the hold untouched", func(t *testing.T, r *lateRig) {
			got, err := r.writeAcquire(tokenB, "w2", false)
			ok(t, got, err, 1)
			r.rdb.PExpire(ctx, r.k.Lock, otherLong)
			gaveUp(t, r)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			wantRefused(t, reply)
			r.wantValue(t, r.k.Lock, tokenB)
			r.wantLong(t, r.k.Lock)
			r.wantNotListed(t, r.k.Writers(), "w")
		}},
		{"a try after the lock was taken: refused, never listed", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenB)
		}, func(t *testing.T, r *lateRig) (int64, error) {
			return r.writeAcquire(tokenA, "w", true)
		}, func(t *testing.T, r *lateRig, reply int64) {
			wantRefused(t, reply)
			if _, there := r.score(t, r.k.Writers(), "w"); there {
				t.Fatal("a try listed its writer")
			}
		}},
	})
}

// TestLateSemaphoreAcquire: a Semaphore attempt that lands late (size 2). The waiter's id
// ("w1") is its request's; the holder token is the attempt's.
func TestLateSemaphoreAcquire(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	land := func(t *testing.T, r *lateRig) (int64, error) { return r.semAcquire(tokenA, 1, "w1", false) }
	gaveUp := func(t *testing.T, r *lateRig) {
		t.Helper()
		got, err := r.semRelease(tokenA) // the undo: found nothing
		ok(t, got, err, 0)
		if _, err := r.semLeave("w1"); err != nil {
			t.Fatal(err)
		}
	}
	full := func(t *testing.T, r *lateRig) {
		t.Helper()
		got, err := r.semAcquire(tokenB, 2, "w0", false)
		ok(t, got, err, 1)
		r.rdb.ZAdd(ctx, r.k.Lock, redis.Z{Score: float64(r.now(t) + otherLong.Milliseconds()), Member: tokenB})
		r.rdb.PExpire(ctx, r.k.Lock, otherLong)
		r.rdb.PExpire(ctx, r.k.Permits(), otherLong)
	}
	runLate(t, rdb, "semaphore_acquire", []late{
		{"after its undo and leave, full: refused, not queued", func(t *testing.T, r *lateRig) {
			full(t, r)
			if got, err := r.semAcquire(tokenA, 1, "w1", false); err != nil || got > 0 { // queued on time
				t.Fatalf("acquire of a full semaphore: %d, %v", got, err)
			}
			gaveUp(t, r)
			r.heard(t, "left")
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			wantRefused(t, reply)
			r.wantList(t, r.k.Queue())
			r.wantNotListed(t, r.k.QueueDeadlines(), "w1")
			r.wantEnds(t, r.k.Lock, tokenB, otherLong)
			r.wantLong(t, r.k.Lock)
			// The next request is not held up behind the waiter that left.
			got, err := r.semRelease(tokenB)
			ok(t, got, err, 1)
			got, err = r.semAcquire(tokenC, 1, "w2", false)
			ok(t, got, err, 2)
		}},
		{"after its undo and leave, others queued ahead: refused, not queued", func(t *testing.T, r *lateRig) {
			full(t, r)
			if got, err := r.semAcquire(tokenC, 1, "w2", false); err != nil || got > 0 {
				t.Fatalf("acquire of a full semaphore: %d, %v", got, err)
			}
			got, err := r.semRelease(tokenB) // room, but w2 is first
			ok(t, got, err, 1)
			gaveUp(t, r)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			wantRefused(t, reply)
			r.wantList(t, r.k.Queue(), "w2")
			r.wantNotListed(t, r.k.QueueDeadlines(), "w1")
		}},
		{"after its undo and leave, room and no queue: refused as gone, nothing taken", gaveUp, land, func(t *testing.T, r *lateRig, reply int64) {
			wantGoneReply(t, reply)
			r.wantGone(t, r.k.Lock)
			r.wantList(t, r.k.Queue())
		}},
		{"beside a live holder that extended: its lease untouched", func(t *testing.T, r *lateRig) {
			got, err := r.semAcquire(tokenB, 1, "w0", false)
			ok(t, got, err, 1)
			r.rdb.ZAdd(ctx, r.k.Lock, redis.Z{Score: float64(r.now(t) + otherLong.Milliseconds()), Member: tokenB})
			r.rdb.PExpire(ctx, r.k.Lock, otherLong)
			r.rdb.PExpire(ctx, r.k.Permits(), otherLong)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 2)
			if s, _ := r.score(t, r.k.Lock, tokenB); int64(s) < r.now(t)+(otherLong-time.Minute).Milliseconds() {
				t.Fatalf("the live holder's lease end moved to %v", s)
			}
			r.wantLong(t, r.k.Lock)
			r.wantLong(t, r.k.Permits())
		}},
		{"a copy after itself landed: nothing changes", func(t *testing.T, r *lateRig) {
			got, err := r.semAcquire(tokenA, 1, "w1", false)
			ok(t, got, err, 1)
		}, land, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1)
			r.wantValue(t, r.k.Fence, "1")
			if n := r.rdb.HGet(ctx, r.k.Permits(), tokenA).Val(); n != "1" {
				t.Fatalf("permits of the token = %q, want 1", n)
			}
		}},
		{"a try after the semaphore filled: refused, never queued", full, func(t *testing.T, r *lateRig) (int64, error) {
			return r.semAcquire(tokenA, 1, "w1", true)
		}, func(t *testing.T, r *lateRig, reply int64) {
			wantRefused(t, reply)
			r.wantList(t, r.k.Queue())
		}},
	})
}

// TestLateWaiterLeave: a leave that lands late.
func TestLateWaiterLeave(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	runLate(t, rdb, "waiter_leave", []late{
		{"writer served meanwhile: nothing published, others untouched", func(t *testing.T, r *lateRig) {
			got, err := r.writeAcquire(tokenA, "w", false)
			ok(t, got, err, 1)
			r.rdb.ZAdd(ctx, r.k.Writers(), redis.Z{Score: float64(r.now(t) + otherLong.Milliseconds()), Member: "w2"})
		}, func(t *testing.T, r *lateRig) (int64, error) { return r.leaveWriters("w") },
			func(t *testing.T, r *lateRig, reply int64) {
				ok(t, reply, nil, 0)
				r.quiet(t)
				r.wantEnds(t, r.k.Writers(), "w2", otherLong)
				r.wantNotListed(t, r.k.Writers(), "w")
				r.wantValue(t, r.k.Lock, tokenA)
			}},
		{"after a late attempt listed the writer again: takes it out", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenB)
			if got, err := r.writeAcquire(tokenA, "w", false); err != nil || got > 0 {
				t.Fatalf("writer behind a writer: %d, %v", got, err)
			}
		}, func(t *testing.T, r *lateRig) (int64, error) { return r.leaveWriters("w") },
			func(t *testing.T, r *lateRig, reply int64) {
				ok(t, reply, nil, 1)
				r.heard(t, "left")
				r.wantNotListed(t, r.k.Writers(), "w")
				r.wantLong(t, r.k.Lock)
			}},
		{"a copy after the leave: its tombstone only lengthened", func(t *testing.T, r *lateRig) {
			r.rdb.ZAdd(ctx, r.k.Writers(), redis.Z{Score: -float64(r.now(t) + otherLong.Milliseconds()), Member: "w"})
		}, func(t *testing.T, r *lateRig) (int64, error) { return r.leaveWriters("w") },
			func(t *testing.T, r *lateRig, reply int64) {
				ok(t, reply, nil, 0)
				r.quiet(t)
				if s, _ := r.score(t, r.k.Writers(), "w"); -int64(s) < r.now(t)+(otherLong-time.Minute).Milliseconds() {
					t.Fatalf("the tombstone was shortened to %v", s)
				}
			}},
		{"Semaphore waiter served meanwhile: the queue untouched", func(t *testing.T, r *lateRig) {
			got, err := r.semAcquire(tokenB, 2, "w0", false)
			ok(t, got, err, 1)
			for _, w := range []string{"w1", "w2", "w3"} {
				if got, err := r.semAcquire(tokenC+w, 1, w, false); err != nil || got > 0 {
					t.Fatalf("acquire of a full semaphore: %d, %v", got, err)
				}
			}
		}, func(t *testing.T, r *lateRig) (int64, error) { return r.semLeave("w0") },
			func(t *testing.T, r *lateRig, reply int64) {
				ok(t, reply, nil, 0)
				r.quiet(t)
				r.wantList(t, r.k.Queue(), "w1", "w2", "w3")
				for _, w := range []string{"w1", "w2", "w3"} {
					r.wantEnds(t, r.k.QueueDeadlines(), w, lateLife)
				}
				r.wantEnds(t, r.k.Lock, tokenB, lateTTL)
			}},
		{"Semaphore waiter listed again by a late attempt: only it is taken out", func(t *testing.T, r *lateRig) {
			got, err := r.semAcquire(tokenB, 2, "w0", false)
			ok(t, got, err, 1)
			for _, w := range []string{"w1", "w2", "w3"} {
				if got, err := r.semAcquire(tokenC+w, 1, w, false); err != nil || got > 0 {
					t.Fatalf("acquire of a full semaphore: %d, %v", got, err)
				}
			}
		}, func(t *testing.T, r *lateRig) (int64, error) { return r.semLeave("w2") },
			func(t *testing.T, r *lateRig, reply int64) {
				ok(t, reply, nil, 1)
				r.heard(t, "left")
				r.wantList(t, r.k.Queue(), "w1", "w3")
				r.wantNotListed(t, r.k.QueueDeadlines(), "w2")
			}},
	})
}

// TestLateMutexRelease: a release, or a leave of the turns, that lands late.
func TestLateMutexRelease(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	rel := func(t *testing.T, r *lateRig) (int64, error) {
		return releaseTurn(r.rdb, r.k, tokenA, "PUBLISH", "20000")
	}
	leave := func(t *testing.T, r *lateRig) (int64, error) { return leaveTurns(r.rdb, r.k, "p1", tokenA) }
	p1, p2 := turnArgs{reserve: 1, me: "p1"}, turnArgs{reserve: 1, me: "p2"}
	runLate(t, rdb, "mutex_release", []late{
		{"after another process took the lock: nothing changes", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenB)
		}, rel, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			r.wantValue(t, r.k.Lock, tokenB)
			r.wantLong(t, r.k.Lock)
			r.quiet(t)
		}},
		{"after the same process's next hold: nothing changes", func(t *testing.T, r *lateRig) {
			got, err := acquireAs(r.rdb, r.k, tokenC, time.Minute, p1)
			ok(t, got, err, 1)
			r.rdb.PExpire(ctx, r.k.Lock, otherLong)
		}, rel, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			r.wantValue(t, r.k.Lock, tokenC)
			r.wantLong(t, r.k.Lock)
			r.quiet(t)
		}},
		{"after the lock was promised to a process: the promise stands", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, "turn:p2")
		}, rel, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			r.wantValue(t, r.k.Lock, "turn:p2")
			r.quiet(t)
		}},
		{"after its attempt landed late, past its undo: that hold is passed on", func(t *testing.T, r *lateRig) {
			got, err := acquire(r.rdb, r.k, tokenA, time.Minute)
			ok(t, got, err, 1)
		}, rel, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1)
			r.wantGone(t, r.k.Lock)
			r.heard(t, "released")
		}},
		{"a leave after a newer waiter of the process asked: its request and place stay", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, tokenB)
			for _, a := range []struct {
				tok string
				p   turnArgs
			}{{tokenC, p1}, {tokenB + "x", p2}} {
				if got, err := acquireAs(r.rdb, r.k, a.tok, time.Minute, a.p); err != nil || got > 0 {
					t.Fatalf("acquire of a held lock: %d, %v", got, err)
				}
			}
		}, leave, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			r.wantList(t, r.k.Turns, "p1", "p2")
			if ask := r.rdb.HGet(ctx, r.k.Asks, "p1").Val(); len(ask) < len(tokenC) || ask[:len(tokenC)] != tokenC {
				t.Fatalf("p1's request = %q, want the newer waiter's", ask)
			}
			r.wantValue(t, r.k.Lock, tokenB)
			r.wantServed(t, tokenA, 0) // left: an attempt of it landing later takes nothing
			r.quiet(t)
		}},
		{"a leave after a newer waiter of the process was granted: its hold stays", func(t *testing.T, r *lateRig) {
			got, err := acquireAs(r.rdb, r.k, tokenB, time.Minute, p2)
			ok(t, got, err, 1)
			if got, err := acquireAs(r.rdb, r.k, tokenC, time.Minute, p1); err != nil || got > 0 {
				t.Fatalf("acquire of a held lock: %d, %v", got, err)
			}
			got, err = releaseTurn(r.rdb, r.k, tokenB, "PUBLISH", "20000")
			ok(t, got, err, 1)
			r.heard(t, "grant:p1:"+tokenC+":2:1")
		}, leave, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 0)
			r.wantValue(t, r.k.Lock, tokenC)
			r.wantServed(t, tokenA, 0)
			r.wantServed(t, tokenC, grantLength) // granted, for the grant length
			r.quiet(t)
		}},
		{"a leave after the process was promised the turn: the turn is passed on (a lost place)", func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, "turn:p1")
			r.rdb.RPush(ctx, r.k.Turns, "p2")
			r.rdb.HSet(ctx, r.k.Asks, "p2", tokenB+" 60000 1 1") // lapsed: p2 gets a turn
		}, leave, func(t *testing.T, r *lateRig, reply int64) {
			ok(t, reply, nil, 1)
			r.heard(t, "turn:p2")
			r.wantValue(t, r.k.Lock, "turn:p2")
			r.wantServed(t, tokenA, 0)
		}},
	})
}

// TestLateMemberRelease: a reader's or a Semaphore holder's release that lands late.
func TestLateMemberRelease(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	runLate(t, rdb, "member_release", []late{
		{"reader: after its lease ended and others read: nothing changes", func(t *testing.T, r *lateRig) {
			got, err := r.readAcquire(tokenB, "")
			ok(t, got, err, 1)
		}, func(t *testing.T, r *lateRig) (int64, error) { return r.readRelease(tokenA) },
			func(t *testing.T, r *lateRig, reply int64) {
				ok(t, reply, nil, 0)
				r.wantEnds(t, r.k.Readers(), tokenB, lateTTL)
				r.quiet(t)
			}},
		{"Semaphore: after its lease ended and others hold: nothing changes", func(t *testing.T, r *lateRig) {
			got, err := r.semAcquire(tokenB, 2, "w0", false)
			ok(t, got, err, 1)
			if got, err := r.semAcquire(tokenC, 1, "w1", false); err != nil || got > 0 {
				t.Fatalf("acquire of a full semaphore: %d, %v", got, err)
			}
		}, func(t *testing.T, r *lateRig) (int64, error) { return r.semRelease(tokenA) },
			func(t *testing.T, r *lateRig, reply int64) {
				ok(t, reply, nil, 0)
				r.wantEnds(t, r.k.Lock, tokenB, lateTTL)
				if n := r.rdb.HGet(ctx, r.k.Permits(), tokenB).Val(); n != "2" {
					t.Fatalf("the holder's permits = %q, want 2", n)
				}
				r.wantList(t, r.k.Queue(), "w1")
				r.quiet(t)
			}},
		{"Semaphore: after its attempt landed late, past its undo: those permits come back", func(t *testing.T, r *lateRig) {
			got, err := r.semAcquire(tokenA, 2, "w0", false)
			ok(t, got, err, 1)
		}, func(t *testing.T, r *lateRig) (int64, error) { return r.semRelease(tokenA) },
			func(t *testing.T, r *lateRig, reply int64) {
				ok(t, reply, nil, 1)
				r.heard(t, "released")
				if r.rdb.HExists(ctx, r.k.Permits(), tokenA).Val() {
					t.Fatal("the permits are still counted")
				}
			}},
	})
}

// multiKeys are the keys of two names of one slot, for multi_acquire and multi_release.
func multiKeys(t *testing.T, base string) (a, b keyspace.Keys) {
	return keys(t, "{"+base+"}:a"), keys(t, "{"+base+"}:b")
}

// TestLateMulti: a MultiMutex attempt or release that lands late.
func TestLateMulti(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	acq := func(a, b keyspace.Keys, token string) (int64, error) {
		return runMultiAcquire(rdb, []keyspace.Keys{a, b}, token, lateTTL)
	}
	rel := func(a, b keyspace.Keys, token string) (int64, error) {
		return runMultiRelease(rdb, []keyspace.Keys{a, b}, token, "PUBLISH", "20000")
	}
	r := &lateRig{rdb: rdb}

	t.Run("acquire after its undo, one name taken by another: nothing changes", func(t *testing.T) {
		a, b := multiKeys(t, "late-multi-1")
		rdb.Set(ctx, b.Lock, tokenB, otherLong)
		rdb.Set(ctx, b.Fence, 7, 0)
		got, err := acq(a, b, tokenA)
		if err != nil || got > 0 {
			t.Fatalf("late acquire = %d, %v; want a refusal", got, err)
		}
		r.wantGone(t, a.Lock)
		r.wantValue(t, b.Lock, tokenB)
		r.wantLong(t, b.Lock)
		r.wantGone(t, a.Fence)
		r.wantValue(t, b.Fence, "7")
	})
	t.Run("acquire after its undo, all free: every name until its own TTL", func(t *testing.T) {
		a, b := multiKeys(t, "late-multi-2")
		got, err := acq(a, b, tokenA)
		must(t, got, err, 1)
		for _, k := range []keyspace.Keys{a, b} {
			r.wantValue(t, k.Lock, tokenA)
			r.wantPTTL(t, k.Lock, 1, lateTTL)
		}
	})
	t.Run("a copy after its hold was extended: the hold's fence, nothing changed", func(t *testing.T) {
		a, b := multiKeys(t, "late-multi-3")
		got, err := acq(a, b, tokenA)
		must(t, got, err, 1)
		rdb.PExpire(ctx, a.Lock, otherLong)
		rdb.PExpire(ctx, b.Lock, otherLong)
		got, err = acq(a, b, tokenA)
		must(t, got, err, 1)
		for _, k := range []keyspace.Keys{a, b} {
			r.wantValue(t, k.Lock, tokenA)
			r.wantLong(t, k.Lock)
			r.wantValue(t, k.Fence, "1")
		}
	})
	t.Run("release after one name was taken by a later hold: only its own names go", func(t *testing.T) {
		a, b := multiKeys(t, "late-multi-4")
		ps := confirmed(t, rdb.Subscribe(ctx, a.Channel, b.Channel))
		confirmedAlso(t, ps)
		rdb.Set(ctx, a.Lock, tokenB, otherLong) // this process's later hold, or another's
		rdb.Set(ctx, b.Lock, tokenA, time.Minute)
		got, err := rel(a, b, tokenA)
		must(t, got, err, 0)
		r.wantValue(t, a.Lock, tokenB)
		r.wantLong(t, a.Lock)
		r.wantGone(t, b.Lock)
		receive(t, ps, b.Channel, "released")
		rdb.Publish(ctx, a.Channel, "marker")
		receive(t, ps, a.Channel, "marker") // nothing for the name left alone
	})
	t.Run("release after every name was taken: nothing changes", func(t *testing.T) {
		a, b := multiKeys(t, "late-multi-5")
		rdb.Set(ctx, a.Lock, tokenB, otherLong)
		rdb.Set(ctx, b.Lock, tokenC, otherLong)
		got, err := rel(a, b, tokenA)
		must(t, got, err, 0)
		r.wantValue(t, a.Lock, tokenB)
		r.wantValue(t, b.Lock, tokenC)
		r.wantLong(t, a.Lock)
		r.wantLong(t, b.Lock)
	})
}

// TestLateMultiCopyNeverTakesBackLostName: a MultiMutex hold of a and b (tokenA) loses b
// out of band (ForceUnlock, a DEL), and another holder takes b and releases it. A copy of
// the hold's acquisition that lands then finds a still the hold's and b free; its token is
// a living tombstone, so it takes nothing back (it would hold b under the old token, and
// the old lease's Extend would keep succeeding), and a late Extend of the hold, to an
// hour, finds b not its own.
func TestLateMultiCopyNeverTakesBackLostName(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	s := newServedRig(t, rdb, "late-multi-lost")
	a, b := s.ks[0], s.ks[1]
	got, err := runMultiAcquire(rdb, s.ks, tokenA, lateTTL)
	must(t, got, err, 1)
	must(t, 1, rdb.Del(ctx, b.Lock).Err(), 1) // out of band
	got, err = acquire(rdb, b, tokenB, lateTTL)
	must(t, got, err, 2)
	got, err = release(rdb, b, tokenB, "")
	must(t, got, err, 1)

	before := s.snapshot(t)
	got, err = runMultiAcquire(rdb, s.ks, tokenA, lateTTL) // the copy, landing late
	if err != nil || !Gone(got) {
		t.Fatalf("late copy = %d, %v; want the gone reply", got, err)
	}
	s.unchanged(t, before, "the late copy")
	s.wantGone(t, b.Lock)
	s.wantValue(t, a.Lock, tokenA)
	got, err = runMultiExtend(rdb, s.ks, tokenA, time.Hour)
	must(t, got, err, 0)
	s.unchanged(t, before, "the late Extend")
}

// confirmedAlso reads the confirmation of a second channel of ps.
func confirmedAlso(t *testing.T, ps *redis.PubSub) {
	t.Helper()
	if _, err := ps.ReceiveTimeout(ctx, 5*time.Second); err != nil {
		t.Fatalf("subscription not confirmed: %v", err)
	}
}

// TestLateFenceRaise: a raise that lands after the counter moved on changes nothing.
func TestLateFenceRaise(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "late:fence")
	rdb.Set(ctx, k.Fence, 12, 0)
	got, err := raise(rdb, k, 9)
	must(t, got, err, 12)
	if v := rdb.Get(ctx, k.Fence).Val(); v != "12" {
		t.Fatalf("counter = %s after a late raise, want 12", v)
	}
	got, err = acquire(rdb, k, tokenA, time.Minute)
	must(t, got, err, 13)
}

// lockKeys8 are a lock's keys as lock_read.lua lists them.
func lockKeys8(k keyspace.Keys) []string {
	return []string{k.Lock, k.Fence, k.Turns, k.Queue(), k.QueueDeadlines(), k.Readers(), k.Writers(), k.Permits()}
}

// lockVersion is what a caller of force_unlock.lua read of the lock (inspect.lua): its
// fencing counter and its lock key's value, as the script's ARGV[5] and ARGV[6].
type lockVersion struct{ fence, value string }

func (r *lateRig) read(t *testing.T) lockVersion {
	t.Helper()
	reply, err := Inspect.Run(ctx, r.rdb, lockKeys8(r.k), 100).Slice()
	if err != nil {
		t.Fatal(err)
	}
	var v lockVersion
	v.fence, _ = reply[6].(string)
	if value, ok := reply[4].(string); ok {
		v.value = "=" + value
	}
	return v
}

// force lands force_unlock.lua sent with v, and returns its changed flag.
func (r *lateRig) force(v lockVersion) (int64, error) {
	k := r.k
	reply, err := ForceUnlock.Run(ctx, r.rdb, lockKeys8(k), 100, k.Channel, "PUBLISH", k.GrantedPrefix(), v.fence, v.value).Slice()
	if err != nil {
		return 0, err
	}
	if len(reply) != 15 {
		return 0, fmt.Errorf("force_unlock replied %d values, want 15", len(reply))
	}
	changed, _ := reply[14].(int64)
	return changed, nil
}

// TestLateInspectAndForceUnlock: inspect writes nothing whenever it lands; force_unlock
// removes the lock only as its caller read it, so a late landing never removes a lease
// taken after its caller gave up, whatever the kind.
func TestLateInspectAndForceUnlock(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	t.Run("inspect", func(t *testing.T) {
		r := &lateRig{rdb: rdb, k: keys(t, "late:inspect")}
		rdb.Set(ctx, r.k.Lock, tokenB, otherLong)
		rdb.Set(ctx, r.k.Fence, 3, 0)
		if err := Inspect.Run(ctx, rdb, lockKeys8(r.k), 100).Err(); err != nil {
			t.Fatal(err)
		}
		r.wantValue(t, r.k.Lock, tokenB)
		r.wantLong(t, r.k.Lock)
		r.wantValue(t, r.k.Fence, "3")
	})
	var v lockVersion // what the late call's caller read, set by each case's state
	land := func(t *testing.T, r *lateRig) (int64, error) { return r.force(v) }
	runLate(t, rdb, "force_unlock", []late{{
		name: "on the lock as its caller read it: removed, counter kept, waiters woken",
		state: func(t *testing.T, r *lateRig) {
			got, err := acquire(rdb, r.k, tokenA, time.Minute)
			ok(t, got, err, 1)
			v = r.read(t)
		},
		land: land,
		check: func(t *testing.T, r *lateRig, changed int64) {
			ok(t, changed, nil, 0)
			r.wantGone(t, r.k.Lock)
			r.wantValue(t, r.k.Fence, "1")
			r.heard(t, "released")
		},
	}, {
		// The harm this rule was written for: the operator's call gave up, the holder it
		// saw expired, and a new holder took the lock before the removal landed.
		name: "after a new holder took the lock: nothing changes",
		state: func(t *testing.T, r *lateRig) {
			got, err := acquire(rdb, r.k, tokenA, time.Minute)
			ok(t, got, err, 1)
			v = r.read(t)
			rdb.Del(ctx, r.k.Lock)
			got, err = acquire(rdb, r.k, tokenB, otherLong)
			ok(t, got, err, 2)
		},
		land: land,
		check: func(t *testing.T, r *lateRig, changed int64) {
			ok(t, changed, nil, 1)
			r.wantValue(t, r.k.Lock, tokenB)
			r.wantLong(t, r.k.Lock)
			r.wantValue(t, r.k.Fence, "2")
			r.quiet(t)
		},
	}, {
		name: "an RWMutex held by readers only, after another reader came: nothing changes",
		state: func(t *testing.T, r *lateRig) {
			got, err := r.readAcquire(tokenA, "")
			ok(t, got, err, 1)
			v = r.read(t)
			got, err = r.readAcquire(tokenB, "")
			ok(t, got, err, 2)
		},
		land: land,
		check: func(t *testing.T, r *lateRig, changed int64) {
			ok(t, changed, nil, 1)
			r.wantEnds(t, r.k.Readers(), tokenA, lateTTL)
			r.wantEnds(t, r.k.Readers(), tokenB, lateTTL)
			r.quiet(t)
		},
	}, {
		name: "a Semaphore, after another holder came: nothing changes",
		state: func(t *testing.T, r *lateRig) {
			got, err := r.semAcquire(tokenA, 1, "wa", true)
			ok(t, got, err, 1)
			v = r.read(t)
			got, err = r.semAcquire(tokenB, 1, "wb", true)
			ok(t, got, err, 2)
		},
		land: land,
		check: func(t *testing.T, r *lateRig, changed int64) {
			ok(t, changed, nil, 1)
			r.wantEnds(t, r.k.Lock, tokenA, lateTTL)
			r.wantEnds(t, r.k.Lock, tokenB, lateTTL)
			if n := rdb.HLen(ctx, r.k.Permits()).Val(); n != 2 {
				t.Fatalf("%d holders' permits kept, want 2", n)
			}
			r.quiet(t)
		},
	}, {
		name: "a client that knows no counter took the key: nothing changes",
		state: func(t *testing.T, r *lateRig) {
			r.setLong(t, r.k.Lock, "theirs-1")
			v = r.read(t)
			r.setLong(t, r.k.Lock, "theirs-2")
		},
		land: land,
		check: func(t *testing.T, r *lateRig, changed int64) {
			ok(t, changed, nil, 1)
			r.wantValue(t, r.k.Lock, "theirs-2")
			r.quiet(t)
		},
	}, {
		// A deadline is no owner: a later TimestampMutex hold may write the one the caller
		// read (a client whose clock and lease length give the same deadline; its attempt
		// has an id of its own, so the first hold's tombstone does not keep it out). Its
		// acquisition raised the counter.
		name: "a TimestampMutex hold that wrote the deadline read: nothing changes",
		state: func(t *testing.T, r *lateRig) {
			now := time.Now().UnixMilli()
			got, err := stampAcq(rdb, r.k, tokenB, now, now+60_000, time.Minute)
			ok(t, got, err, 1)
			v = r.read(t)
			rdb.Del(ctx, r.k.Lock)
			got, err = stampAcq(rdb, r.k, tokenC, now+15_000, now+60_000, 45*time.Second)
			ok(t, got, err, 2)
		},
		land: land,
		check: func(t *testing.T, r *lateRig, changed int64) {
			ok(t, changed, nil, 1)
			if n := rdb.Exists(ctx, r.k.Lock).Val(); n != 1 {
				t.Fatal("the later hold's key was removed")
			}
			r.wantValue(t, r.k.Fence, "2")
			r.quiet(t)
		},
	}})
}

// TestLateStamp: TimestampMutex attempts and releases that land late.
func TestLateStamp(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	r := &lateRig{rdb: rdb}
	sent := time.Now().UnixMilli() - 10_000 // the late call's clock: 10s ago
	mine := sent + lateTTL.Milliseconds()

	t.Run("acquire judges the holder by its own earlier clock: no takeover", func(t *testing.T) {
		k := keys(t, "late:stamp:1")
		// Passed by now, not when the late call was sent: an on-time call would not take it.
		holder := strconv.FormatInt(sent+5_000, 10)
		rdb.Set(ctx, k.Lock, holder, otherLong)
		got, err := stampAcq(rdb, k, tokenA, sent, mine, lateTTL)
		if err != nil || got > 0 {
			t.Fatalf("late acquire = %d, %v; want a refusal", got, err)
		}
		r.wantValue(t, k.Lock, holder)
		r.wantLong(t, k.Lock)
		r.wantGone(t, k.Fence)
	})
	t.Run("acquire of a free key: held until its own TTL at worst", func(t *testing.T) {
		k := keys(t, "late:stamp:2")
		got, err := stampAcq(rdb, k, tokenA, sent, mine, lateTTL)
		must(t, got, err, 1)
		r.wantValue(t, k.Lock, strconv.FormatInt(mine, 10))
		r.wantPTTL(t, k.Lock, 1, lateTTL)
	})
	t.Run("a copy after itself took the key: acquired with the current counter, nothing written", func(t *testing.T) {
		// A go-redis resend of a call whose first copy took the key and whose reply was
		// lost: refused, it would leave the lock taken by no one for a TTL.
		k := keys(t, "late:stamp:3")
		got, err := stampAcq(rdb, k, tokenA, sent, mine, lateTTL)
		must(t, got, err, 1)
		rdb.PExpire(ctx, k.Lock, otherLong) // a longer expiry than the copy would set
		got, err = stampAcq(rdb, k, tokenA, sent, mine, lateTTL)
		must(t, got, err, 1)
		r.wantValue(t, k.Lock, strconv.FormatInt(mine, 10))
		r.wantLong(t, k.Lock)
		r.wantValue(t, k.Fence, "1")
	})
	t.Run("release after a later hold wrote a later deadline: nothing changes", func(t *testing.T) {
		k := keys(t, "late:stamp:4")
		later := strconv.FormatInt(mine+1, 10)
		rdb.Set(ctx, k.Lock, later, otherLong)
		got, err := runStampRelease(rdb, k, "PUBLISH", sent, mine)
		must(t, got, err, 0)
		r.wantValue(t, k.Lock, later)
		r.wantLong(t, k.Lock)
	})
	t.Run("release after a later hold of the same process in its millisecond: nothing changes", func(t *testing.T) {
		// The release of hold 1 (deadline written at now) is sent; hold 2 acquires in the
		// same millisecond with the same lease length, and its acquire lands first. Its
		// deadline is one millisecond later: a Client's holds never own the same deadline
		// (stampBook, engine/timestamp.go).
		k := keys(t, "late:stamp:same-ms")
		now := time.Now().UnixMilli()
		deadline := now + lateTTL.Milliseconds()
		got, err := stampAcq(rdb, k, tokenB, now, deadline+1, lateTTL)
		must(t, got, err, 1)
		got, err = runStampRelease(rdb, k, "PUBLISH", deadline) // hold 1's release, landing late
		must(t, got, err, 0)
		r.wantValue(t, k.Lock, strconv.FormatInt(deadline+1, 10))
		r.wantPTTL(t, k.Lock, 1, lateTTL)
	})
	t.Run("release after another client's GETSET: nothing changes", func(t *testing.T) {
		k := keys(t, "late:stamp:5")
		theirs := strconv.FormatInt(time.Now().UnixMilli()+30_000, 10)
		rdb.Set(ctx, k.Lock, theirs, 0) // GETSET drops the expiry
		got, err := runStampRelease(rdb, k, "PUBLISH", mine)
		must(t, got, err, 0)
		r.wantValue(t, k.Lock, theirs)
	})
	t.Run("release after its attempt landed late, past its undo: deleted", func(t *testing.T) {
		k := keys(t, "late:stamp:6")
		got, err := stampAcq(rdb, k, tokenA, sent, mine, lateTTL)
		must(t, got, err, 1)
		got, err = runStampRelease(rdb, k, "", mine)
		must(t, got, err, 1)
		r.wantGone(t, k.Lock)
	})
}

// TestLateServedWriterNeverListedAgain: a writer's earlier attempt that lands after a
// later attempt of the same request took the write lock finds the writer gone: listed
// again, it would keep new readers out for an entry's life after the writer released.
func TestLateServedWriterNeverListedAgain(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	r := &lateRig{rdb: rdb, k: keys(t, "finding:rw")}
	got, err := r.writeAcquire(tokenB, "w", false) // the request's second attempt: served
	must(t, got, err, 1)
	if _, err := r.writeAcquire(tokenA, "w", false); err != nil { // its first, landing late
		t.Fatal(err)
	}
	got, err = release(rdb, r.k, tokenB, "") // the writer is done
	must(t, got, err, 1)
	got, err = r.readAcquire(tokenC, "")
	if err != nil || got <= 0 {
		t.Fatalf("a reader after the served writer released: %d, %v: kept out by the writer's entry, brought back", got, err)
	}
}

// TestLateServedSemaphoreWaiterNeverQueuedAgain: likewise a Semaphore waiter: queued
// again at the head of an empty queue, every later request would wait behind it until its
// entry died, though permits are free.
func TestLateServedSemaphoreWaiterNeverQueuedAgain(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	r := &lateRig{rdb: rdb, k: keys(t, "finding:sem")}
	got, err := r.semAcquire(tokenB, 2, "w1", false) // served, the semaphore full
	must(t, got, err, 1)
	if _, err := r.semAcquire(tokenA, 2, "w1", false); err != nil { // an earlier attempt, late
		t.Fatal(err)
	}
	got, err = r.semRelease(tokenB)
	must(t, got, err, 1)
	got, err = r.semAcquire(tokenC, 1, "w2", false)
	if err != nil || got <= 0 {
		t.Fatalf("a request after the served waiter released: %d, %v; queue %v: held up by the served waiter's entry, brought back",
			got, err, rdb.LRange(ctx, r.k.Queue(), 0, -1).Val())
	}
}

// TestLateOwnTokenCopyNeverShortens: mutex_acquire and fair_acquire, finding their own
// token (a copy of the call that landed first, or a grant), never shorten the key: a copy
// that lands after the hold was extended must not cut it.
func TestLateOwnTokenCopyNeverShortens(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	r := &lateRig{rdb: rdb}
	t.Run("mutex_acquire", func(t *testing.T) {
		k := keys(t, "finding:mutex")
		got, err := acquire(rdb, k, tokenA, time.Minute)
		must(t, got, err, 1)
		rdb.PExpire(ctx, k.Lock, otherLong) // Extend(1h)
		got, err = acquire(rdb, k, tokenA, time.Minute)
		must(t, got, err, 2)
		r.wantLong(t, k.Lock)
	})
	t.Run("fair_acquire", func(t *testing.T) {
		k := keys(t, "finding:fair")
		fk := fairKeys(k)
		got, err := FairAcquire.Run(ctx, rdb, fk, tokenA, 60000, 3000, "0").Int64()
		must(t, got, err, 1)
		rdb.PExpire(ctx, k.Lock, otherLong)
		got, err = FairAcquire.Run(ctx, rdb, fk, tokenA, 60000, 3000, "0").Int64()
		must(t, got, err, 1)
		r.wantLong(t, k.Lock)
	})
}

// TestCopiesOfAbandonedAttemptDoNotAddUp: an attempt whose caller gave up (a fresh token,
// which does not stand) has its undo land first, finding nothing; then two copies of the
// attempt land. Copy 1 takes the free lock for its TTL (2s); copy 2, 1.5s later (the key's
// PTTL brought down to 500ms), finds its own token and leaves the expiry as copy 1 set it:
// the lock no one holds stays taken for one TTL, not 3.5s. A copy of a Mutex standing
// request (its token may have been granted with a shorter lease) still lengthens the key
// to its TTL.
func TestCopiesOfAbandonedAttemptDoNotAddUp(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	const ttl, left = 2 * time.Second, 500 * time.Millisecond // copy 2 lands 1.5s after copy 1
	mutexUndo := func(ks []keyspace.Keys) (int64, error) { return release(rdb, ks[0], tokenA, "") }
	for i, kind := range []struct {
		name    string
		names   int
		undo    func(ks []keyspace.Keys) (int64, error)
		attempt func(ks []keyspace.Keys) (int64, error)
	}{
		{"mutex_acquire, not standing", 1, mutexUndo, func(ks []keyspace.Keys) (int64, error) {
			return acquire(rdb, ks[0], tokenA, ttl)
		}},
		{"rw_write_acquire", 1, mutexUndo, func(ks []keyspace.Keys) (int64, error) {
			return writeAcquireFor(rdb, ks[0], tokenA, ttl, "w", true)
		}},
		{"multi_acquire", 2, func(ks []keyspace.Keys) (int64, error) {
			return runMultiRelease(rdb, ks, tokenA, "", "")
		}, func(ks []keyspace.Keys) (int64, error) {
			return runMultiAcquire(rdb, ks, tokenA, ttl)
		}},
	} {
		t.Run(kind.name, func(t *testing.T) {
			a, b := multiKeys(t, fmt.Sprintf("copies:%d", i))
			ks := []keyspace.Keys{a, b}[:kind.names]
			r := &lateRig{rdb: rdb}
			got, err := kind.undo(ks)
			must(t, got, err, 0)
			got, err = kind.attempt(ks) // copy 1
			if err != nil || got <= 0 {
				t.Fatalf("copy 1 on a free lock = %d, %v; want it acquired", got, err)
			}
			for _, k := range ks {
				r.wantValue(t, k.Lock, tokenA)
				r.wantPTTL(t, k.Lock, 1, ttl)
				if err := rdb.PExpire(ctx, k.Lock, left).Err(); err != nil {
					t.Fatal(err)
				}
			}
			got, err = kind.attempt(ks) // copy 2, 1.5s later
			if err != nil || got <= 0 {
				t.Fatalf("copy 2, finding its own token = %d, %v; want it acquired", got, err)
			}
			for _, k := range ks {
				r.wantValue(t, k.Lock, tokenA)
				r.wantPTTL(t, k.Lock, 1, left)
			}
		})
	}
	t.Run("mutex_acquire, a standing request: lengthened to its TTL", func(t *testing.T) {
		r := &lateRig{rdb: rdb, k: keys(t, "copies:standing")}
		p1 := turnArgs{reserve: 1, me: "p1"}
		got, err := acquireAs(rdb, r.k, tokenA, ttl, p1)
		must(t, got, err, 1)
		if err := rdb.PExpire(ctx, r.k.Lock, left).Err(); err != nil { // a grant's shorter lease, or a copy 1.5s ago
			t.Fatal(err)
		}
		got, err = acquireAs(rdb, r.k, tokenA, ttl, p1)
		must(t, got, err, 2)
		r.wantValue(t, r.k.Lock, tokenA)
		r.wantPTTL(t, r.k.Lock, ttl-left, ttl) // about its TTL, well above the 500ms it had
	})
}
