package scripts

import (
	"context"
	"crypto/sha1"
	"encoding/binary"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

const (
	tokenA = "0123456789abcdef0123456789abcdef"
	tokenB = "fedcba9876543210fedcba9876543210"
)

func keys(t testing.TB, name string) keyspace.Keys {
	t.Helper()
	k, err := keyspace.For("dlock:", name)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// acquire takes no turns and reserves one token, as a quorum node does.
func acquire(rdb redis.Scripter, k keyspace.Keys, token string, ttl time.Duration) (int64, error) {
	return acquireAs(rdb, k, token, ttl, turnArgs{reserve: 1})
}

// turnArgs are mutex_acquire's arguments about turns and reserved tokens.
type turnArgs struct {
	reserve int64
	me      string // "" for no turns
	try     bool
	first   bool // with me set: an attempt that does not stand (a fresh token's, or a request's first)
}

func flag(b bool) string { return map[bool]string{true: "1", false: "0"}[b] }

// The KEYS of the Mutex scripts, as the engine gives them (target.go).

func mutexAcquireKeys(k keyspace.Keys) []string {
	return []string{k.Lock, k.Fence, k.Turns, k.Asks, k.Gone}
}

func mutexReleaseKeys(k keyspace.Keys) []string {
	return []string{k.Lock, k.Turns, k.Fence, k.Asks, k.Gone}
}

func mutexExtendKeys(k keyspace.Keys) []string {
	return []string{k.Lock, k.Gone}
}

// The KEYS of the acquire scripts of the kinds with a wait list, and their release
// scripts' (the same); the last is the lock's tombstone prefix (gone.lua).

func fairKeys(k keyspace.Keys) []string {
	return []string{k.Lock, k.Fence, k.Queue(), k.QueueDeadlines(), k.Gone}
}

func rwKeys(k keyspace.Keys) []string {
	return []string{k.Lock, k.Fence, k.Readers(), k.Writers(), k.Gone}
}

func semaphoreKeys(k keyspace.Keys) []string {
	return []string{k.Lock, k.Fence, k.Permits(), k.Queue(), k.QueueDeadlines(), k.Gone}
}

// The KEYS of member_release: an RWMutex's readers (the set twice: no permits), or a
// Semaphore's holders and their permits.

func readerKeys(k keyspace.Keys) []string {
	return []string{k.Readers(), k.Readers()}
}

func holderKeys(k keyspace.Keys) []string {
	return []string{k.Lock, k.Permits()}
}

// memberExtendKeys are member_extend's KEYS: member_release's (readerKeys or holderKeys
// of k), then the lock's tombstone prefix.
func memberExtendKeys(members []string, k keyspace.Keys) []string {
	return append(members[:len(members):len(members)], k.Gone)
}

// The KEYS of waiter_leave: an RWMutex's waiting writers (the set twice: no list), or a
// Semaphore's queue deadlines and queue.

func writerLeaveKeys(k keyspace.Keys) []string {
	return []string{k.Writers(), k.Writers()}
}

func queueLeaveKeys(k keyspace.Keys) []string {
	return []string{k.QueueDeadlines(), k.Queue()}
}

// acquireAs runs mutex_acquire.lua; an attempt with me set stands (ARGV[8] "1") unless
// a.first.
func acquireAs(rdb redis.Scripter, k keyspace.Keys, token string, ttl time.Duration, a turnArgs) (int64, error) {
	stands := ""
	if a.me != "" && !a.first {
		stands = "1"
	}
	return MutexAcquire.Run(ctx, rdb, mutexAcquireKeys(k),
		token, ttl.Milliseconds(), a.reserve, a.me, flag(!a.try), 60000, 3000, stands).Int64()
}

func release(rdb redis.Scripter, k keyspace.Keys, token, publish string) (int64, error) {
	return releaseTurn(rdb, k, token, publish, "")
}

func releaseTurn(rdb redis.Scripter, k keyspace.Keys, token, publish, turn string) (int64, error) {
	return MutexRelease.Run(ctx, rdb, mutexReleaseKeys(k), token, k.Channel, publish, turn, 3000, "release", "").Int64()
}

// leaveTurns is mutex_release.lua as process me stops waiting, with its request's token
// ("" for none).
func leaveTurns(rdb redis.Scripter, k keyspace.Keys, me, token string) (int64, error) {
	return MutexRelease.Run(ctx, rdb, mutexReleaseKeys(k), token, k.Channel, "PUBLISH", "20000", 3000, "leave", me).Int64()
}

// extend runs mutex_extend.lua, which only lengthens.
func extend(rdb redis.Scripter, k keyspace.Keys, token string, ttl time.Duration) (int64, error) {
	return MutexExtend.Run(ctx, rdb, mutexExtendKeys(k), token, ttl.Milliseconds()).Int64()
}

// tagOf is refusal.lua's tag of a holder's token.
func tagOf(holder string) uint16 {
	sum := sha1.Sum([]byte(holder))
	if tag := binary.BigEndian.Uint16(sum[:2]); tag != 0 {
		return tag
	}
	return 1
}

// wantRefusal fails unless reply is a refusal with a remaining time in (0, max] by holder
// ("" for none).
func wantRefusal(t *testing.T, reply int64, max time.Duration, holder string) {
	t.Helper()
	want := uint16(0)
	if holder != "" {
		want = tagOf(holder)
	}
	left, tag := Refusal(reply)
	if reply > 0 || left <= 0 || left > max || tag != want {
		t.Fatalf("reply %d = refusal with %v left by holder %d; want (0, %v] left by %d (%q)", reply, left, tag, max, want, holder)
	}
}

// goneLife is gone.lua's GONE_MS: how long a waiter's tombstone lives, and how long a
// holder token's outlives the lease it was last served or extended for.
const goneLife = 10 * time.Second

// tombstoneSlack is how much a tombstone's life may differ from what the test computes: a
// script set it a moment before the test read it.
const tombstoneSlack = time.Second

// agedLife is what an aged holder token's tombstone has left (ageTombstone): that of a
// hold served about its lease and GONE_MS ago, with no Extend since.
const agedLife = 500 * time.Millisecond

// tombstoneKey is the key that makes token a holder token's tombstone (gone.lua): the
// lock's tombstone prefix (keyspace.Keys.Gone) followed by the token (a TimestampMutex's:
// the id of the attempt that acquired).
func tombstoneKey(prefix, token string) string { return prefix + token }

// goneSet is the sorted set the lock's holder tombstones were once members of: the prefix
// without its last ':'. No script writes it any more.
func goneSet(prefix string) string { return strings.TrimSuffix(prefix, ":") }

// tombstones are the keys of the lock's holder token tombstones (every key under prefix).
func tombstones(t *testing.T, rdb *redis.Client, prefix string) []string {
	t.Helper()
	pattern := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`, `]`, `\]`).Replace(prefix) + "*"
	var out []string
	iter := rdb.Scan(ctx, 0, pattern, 100).Iterator()
	for iter.Next(ctx) {
		out = append(out, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// wantTombstoneValue fails unless v, the value of the tombstone key, is "1" or a fencing
// token (a positive integer: a TimestampMutex attempt's, stamp_acquire.lua).
func wantTombstoneValue(t *testing.T, key, v string) {
	t.Helper()
	if n, err := strconv.ParseUint(v, 10, 64); err != nil || n == 0 {
		t.Fatalf("%s = %q, want \"1\" or a fencing token", key, v)
	}
}

// wantTombstoneFor fails unless token is a holder token's tombstone (gone.lua), the
// string key tombstoneKey(prefix, token) holding "1" (a TimestampMutex attempt's: the
// fencing token it took, wantTombstoneValue), that expires GONE_MS after a lease
// of lease from now would end (give or take tombstoneSlack): it was served, or last
// extended, for lease, just now, or longer ago for a longer lease. Nothing of it is kept
// elsewhere: the lock has no goneSet.
func wantTombstoneFor(t *testing.T, rdb *redis.Client, prefix, token string, lease time.Duration) {
	t.Helper()
	key := tombstoneKey(prefix, token)
	if typ := rdb.Type(ctx, key).Val(); typ != "string" {
		t.Fatalf("%s is a %s, want a tombstone (a string key)", key, typ)
	}
	wantTombstoneValue(t, key, rdb.Get(ctx, key).Val())
	left := rdb.PTTL(ctx, key).Val()
	want := lease + goneLife
	if left < want-tombstoneSlack || left > want+tombstoneSlack {
		t.Fatalf("%s dies in %v, want %v (a lease of %v, then GONE_MS)", key, left, want, lease)
	}
	wantNoGoneSet(t, rdb, prefix)
}

// wantNoGoneSet fails if the lock keeps its tombstones anywhere but in their own keys: if
// its goneSet, or a key named prefix alone, exists.
func wantNoGoneSet(t *testing.T, rdb *redis.Client, prefix string) {
	t.Helper()
	if n := rdb.Exists(ctx, goneSet(prefix), prefix).Val(); n != 0 {
		t.Fatalf("%s or %s exists (%s, %s), want tombstones only as keys of their own", goneSet(prefix), prefix,
			rdb.Type(ctx, goneSet(prefix)).Val(), rdb.Type(ctx, prefix).Val())
	}
}

// wantNoTombstone fails if token is a holder token's tombstone.
func wantNoTombstone(t *testing.T, rdb *redis.Client, prefix, token string) {
	t.Helper()
	if key := tombstoneKey(prefix, token); rdb.Exists(ctx, key).Val() != 0 {
		t.Fatalf("%s exists (PTTL %v), want no tombstone of %s", key, rdb.PTTL(ctx, key).Val(), token)
	}
}

// wantNoTombstones fails if the lock has any holder token's tombstone, or a goneSet.
func wantNoTombstones(t *testing.T, rdb *redis.Client, prefix string) {
	t.Helper()
	if keys := tombstones(t, rdb, prefix); len(keys) != 0 {
		t.Fatalf("tombstones %v, want none", keys)
	}
	wantNoGoneSet(t, rdb, prefix)
}

// ageTombstone makes token's tombstone, which must live, one that dies in agedLife: that
// of a hold served about its lease and GONE_MS ago, with no Extend since.
func ageTombstone(t *testing.T, rdb *redis.Client, prefix, token string) {
	t.Helper()
	key := tombstoneKey(prefix, token)
	if ok, err := rdb.PExpire(ctx, key, agedLife).Result(); err != nil || !ok {
		t.Fatalf("PEXPIRE %s: %v, %v; want a tombstone aged", key, ok, err)
	}
	if left := rdb.PTTL(ctx, key).Val(); left <= 0 || left > agedLife {
		t.Fatalf("the aged tombstone %s dies in %v, want in (0, %v]", key, left, agedLife)
	}
}

// killTombstone makes token's tombstone, which must live, one that died a moment ago: the
// lock as a call finds it that lands more than GONE_MS after the lease of the token's
// last serving would have ended.
func killTombstone(t *testing.T, rdb *redis.Client, prefix, token string) {
	t.Helper()
	key := tombstoneKey(prefix, token)
	if n, err := rdb.Del(ctx, key).Result(); err != nil || n != 1 {
		t.Fatalf("DEL %s: %d, %v; want a tombstone killed", key, n, err)
	}
}

// tombstoneLeft reads waiter's tombstone (gone.lua) in a wait list's deadlines: how long
// it lives from now (Redis time), and the set's PTTL, read before now (the set dies at or
// after now+pttl).
func tombstoneLeft(t *testing.T, rdb *redis.Client, deadlines, waiter string) (left, pttl time.Duration) {
	t.Helper()
	score, err := rdb.ZScore(ctx, deadlines, waiter).Result()
	if err != nil {
		t.Fatalf("ZSCORE %s %s: %v, want a tombstone", deadlines, waiter, err)
	}
	if score >= 0 {
		t.Fatalf("%s %s = %v: listed, want a tombstone (a negative score)", deadlines, waiter, score)
	}
	pttl = rdb.PTTL(ctx, deadlines).Val()
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	return time.Duration(-int64(score)-now.UnixMilli()) * time.Millisecond, pttl
}

// wantWaiterTombstone fails unless waiter is a waiter id's tombstone in its wait list's
// deadlines that dies within GONE_MS of now, and deadlines lives at least as long (slack:
// a script's PEXPIRE counts from the script's start, its tombstone from its TIME).
func wantWaiterTombstone(t *testing.T, rdb *redis.Client, deadlines, waiter string) {
	t.Helper()
	left, pttl := tombstoneLeft(t, rdb, deadlines, waiter)
	if left <= 0 || left > goneLife {
		t.Fatalf("%s %s dies in %v, want in (0, %v]", deadlines, waiter, left, goneLife)
	}
	if pttl < left-100*time.Millisecond {
		t.Fatalf("%s PTTL = %v: dies before its tombstone (in %v)", deadlines, pttl, left)
	}
}

// zscore reads a member's score through a script, which works on every Scripter.
func zscore(t *testing.T, rdb redis.Scripter, key, member string) string {
	t.Helper()
	v, err := rdb.Eval(ctx, "return redis.call('ZSCORE', KEYS[1], ARGV[1])", []string{key}, member).Text()
	if err != nil {
		t.Fatalf("ZSCORE %s %s: %v", key, member, err)
	}
	return v
}

func raise(rdb redis.Scripter, k keyspace.Keys, to int64) (int64, error) {
	return FenceRaise.Run(ctx, rdb, []string{k.Fence}, to).Int64()
}

func must(t *testing.T, got int64, err error, want int64) {
	t.Helper()
	if err != nil {
		t.Fatalf("script failed: %v", err)
	}
	if got != want {
		t.Fatalf("script replied %d, want %d", got, want)
	}
}

func wantWrongType(t *testing.T, err error) {
	t.Helper()
	if err == nil || !redis.HasErrorPrefix(err, "WRONGTYPE") {
		t.Fatalf("error = %v, want WRONGTYPE", err)
	}
}

// sources are the embedded scripts by file name.
var sources = map[string]string{
	"mutex_acquire": mutexAcquire, "mutex_release": mutexRelease, "mutex_extend": mutexExtend,
	"fence_raise": fenceRaise, "fair_acquire": fairAcquire, "fair_release": fairRelease,
	"rw_read_acquire": rwReadAcquire, "rw_write_acquire": rwWriteAcquire,
	"member_release": memberRelease, "member_extend": memberExtend,
	"waiter_leave": waiterLeave, "semaphore_acquire": semaphoreAcquire, "refusal": refusal,
	"lock_read": lockRead, "inspect": inspect, "force_unlock": forceUnlock,
	"stamp_acquire": stampAcquire, "stamp_extend": stampExtend, "stamp_release": stampRelease,
	"stamp_owned": stampOwned, "owner": owner,
	"pass_on": passOn, "multi_acquire": multiAcquire, "multi_release": multiRelease,
	"multi_extend": multiExtend, "gone": goneLua, "mutex_asks": mutexAsks, "guard": guard,
	"election_proclaim": electionProclaim, "election_read": electionRead,
	"grant_channel": grantChannel,
}

// TestHeaders: every .lua file is embedded and starts with a header naming its KEYS, ARGV
// and reply.
func TestHeaders(t *testing.T) {
	t.Parallel()
	files, err := filepath.Glob("*.lua")
	if err != nil {
		t.Fatal(err)
	}
	if len(files) != len(sources) {
		t.Errorf("%d .lua files, %d embedded scripts known to the test", len(files), len(sources))
	}
	for _, f := range files {
		name := strings.TrimSuffix(f, ".lua")
		src, ok := sources[name]
		if !ok {
			t.Errorf("%s is not known to the test (or not embedded)", f)
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if string(data) != src {
			t.Errorf("%s differs from the embedded source", f)
		}
		if !strings.HasPrefix(src, "-- "+name+": ") {
			t.Errorf("%s does not start with %q", f, "-- "+name+": ")
		}
		// Every script says what it does when it lands late (late_test.go replays it so).
		header := []string{"-- KEYS[1]", "-- ARGV[1]", "-- Reply:", "\n-- Late: "}
		switch name { // the preludes document their functions
		case "refusal":
			header = []string{"-- refuse(left, holder) returns"}
		case "lock_read":
			header = []string{"-- readLock(limit) reads", "-- KEYS[1]"}
		case "stamp_owned":
			header = []string{"-- owned(value, from) returns"}
		case "mutex_asks":
			header = []string{"-- formatAsk(token, ttl, reserve, expires) is", "-- parseAsk(ask) returns"}
		case "gone":
			header = []string{"-- gone(deadlines, waiter, now)", "-- served(prefix, token, lease)", "-- serveNew(prefix, token, lease, value)", "-- wasServed(prefix, token)", "-- isGone(score)", "-- isListed(score)", "-- pruneGone(set, now)", "-- redisNow()", "-- lengthen(key, ttl)", "-- keepAtLeast(key, ttl)", "-- goneReply()"}
		case "grant_channel":
			header = []string{"-- grantChannel(prefix, waiter) is"}
		case "pass_on":
			header = []string{"-- passOn(lock, turns, fence, asks, goneKey, channel, publish, turnLength, grantLength)"}
		}
		for _, want := range header {
			if !strings.Contains(src, want) {
				t.Errorf("%s header lacks %q", f, want)
			}
		}
	}
}

func TestMutexAcquire(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)

	t.Run("free key gets increasing fences", func(t *testing.T) {
		k := keys(t, "free")
		for want := int64(1); want <= 3; want++ {
			token := fmt.Sprintf("%032d", want) // every acquisition has a fresh token
			got, err := acquire(rdb, k, token, time.Minute)
			must(t, got, err, want)
			if v := rdb.Get(ctx, k.Lock).Val(); v != token {
				t.Fatalf("lock key holds %q, want the token", v)
			}
			if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl <= 0 || pttl > time.Minute {
				t.Fatalf("PTTL = %v, want (0, 1m]", pttl)
			}
			if ttl := rdb.PTTL(ctx, k.Fence).Val(); ttl != -1*time.Nanosecond {
				t.Fatalf("fence PTTL = %v, want no expiry", ttl)
			}
			must(t, 1, rdb.Del(ctx, k.Lock).Err(), 1)
		}
	})

	t.Run("an acquisition makes its token a tombstone until its lease's end and GONE_MS", func(t *testing.T) {
		k := keys(t, "tombstone")
		got, err := acquire(rdb, k, tokenA, time.Minute)
		must(t, got, err, 1)
		wantTombstoneFor(t, rdb, k.Gone, tokenA, time.Minute)
	})

	t.Run("a served token whose hold ended takes nothing: gone, nothing written", func(t *testing.T) {
		k := keys(t, "served")
		got, err := acquire(rdb, k, tokenA, time.Minute)
		must(t, got, err, 1)
		must(t, 1, rdb.Del(ctx, k.Lock).Err(), 1) // the lease was lost
		got, err = acquire(rdb, k, tokenA, time.Minute)
		if err != nil || !Gone(got) {
			t.Fatalf("acquire of a served token = %d, %v; want the gone reply", got, err)
		}
		if n := rdb.Exists(ctx, k.Lock).Val(); n != 0 {
			t.Fatal("a served token took the free lock again")
		}
		if f := rdb.Get(ctx, k.Fence).Val(); f != "1" {
			t.Fatalf("fence = %q after a gone attempt, want 1", f)
		}
		wantTombstoneFor(t, rdb, k.Gone, tokenA, time.Minute)
		got, err = acquire(rdb, k, tokenB, time.Minute) // a fresh token takes it
		must(t, got, err, 2)
	})

	t.Run("held key reports the holder's remaining time", func(t *testing.T) {
		k := keys(t, "held")
		got, err := acquire(rdb, k, tokenA, 10*time.Second)
		must(t, got, err, 1)
		got, err = acquire(rdb, k, tokenB, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		wantRefusal(t, got, 10*time.Second, tokenA)
		if v := rdb.Get(ctx, k.Lock).Val(); v != tokenA {
			t.Fatalf("lock key now holds %q, want the first token", v)
		}
		if f := rdb.Get(ctx, k.Fence).Val(); f != "1" {
			t.Fatalf("fence = %q after a refused acquire, want 1", f)
		}
	})

	t.Run("key without expiry replies 0", func(t *testing.T) {
		k := keys(t, "noexpiry")
		rdb.Set(ctx, k.Lock, "someone-else", 0)
		got, err := acquire(rdb, k, tokenA, time.Minute)
		if err != nil {
			t.Fatal(err)
		}
		if left, holder := Refusal(got); left != 0 || holder != tagOf("someone-else") {
			t.Fatalf("refusal by a key without expiry: %v left, holder %d; want 0, %d", left, holder, tagOf("someone-else"))
		}
		if rdb.Exists(ctx, k.Fence).Val() != 0 {
			t.Fatal("a refused acquire created the fence counter")
		}
	})

	t.Run("wrong type", func(t *testing.T) {
		k := keys(t, "wrongtype")
		rdb.RPush(ctx, k.Lock, "x")
		_, err := acquire(rdb, k, tokenA, time.Minute)
		wantWrongType(t, err)
		if rdb.Type(ctx, k.Lock).Val() != "list" {
			t.Fatal("the list was changed")
		}
	})

	t.Run("broken fence counter leaves no lock behind", func(t *testing.T) {
		k := keys(t, "brokenfence")
		rdb.Set(ctx, k.Fence, tokenB, 0) // e.g. another lock's key by the same name
		_, err := acquire(rdb, k, tokenA, time.Minute)
		if err == nil || !strings.Contains(err.Error(), "not an integer") {
			t.Fatalf("error = %v, want INCR's 'not an integer'", err)
		}
		if n := rdb.Exists(ctx, k.Lock).Val(); n != 0 {
			t.Fatal("the failed acquire left the lock key set")
		}
		rdb.RPush(ctx, k.Fence+"x", "x")
		k.Fence += "x"
		_, err = acquire(rdb, k, tokenA, time.Minute)
		wantWrongType(t, err)
		if n := rdb.Exists(ctx, k.Lock).Val(); n != 0 {
			t.Fatal("the failed acquire left the lock key set")
		}
	})

	// A retry with the same token (its reply lost) succeeds with a fresh fence. One that
	// does not stand leaves the key as its first copy set it: copies do not add up. A
	// standing request's lengthens the key to its TTL (a grant may have set it shorter),
	// and never shortens it.
	t.Run("retry with the same token succeeds with a fresh fence, the expiry left", func(t *testing.T) {
		k := keys(t, "retry")
		rdb.Set(ctx, k.Fence, 41, 0)
		got, err := acquire(rdb, k, tokenA, time.Minute)
		must(t, got, err, 42)
		rdb.PExpire(ctx, k.Lock, time.Second)
		got, err = acquire(rdb, k, tokenA, time.Minute)
		must(t, got, err, 43)
		if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl <= 0 || pttl > time.Second {
			t.Fatalf("PTTL = %v after a retried acquire, want at most the 1s it had", pttl)
		}
	})
	t.Run("retry of a standing request succeeds with a fresh fence, lengthened to its TTL", func(t *testing.T) {
		k := keys(t, "retry-standing")
		p1 := turnArgs{reserve: 1, me: "p1"}
		got, err := acquireAs(rdb, k, tokenA, time.Minute, p1)
		must(t, got, err, 1)
		rdb.PExpire(ctx, k.Lock, time.Second)
		got, err = acquireAs(rdb, k, tokenA, time.Minute, p1)
		must(t, got, err, 2)
		if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl <= 59*time.Second || pttl > time.Minute {
			t.Fatalf("PTTL = %v after a standing request's retry, want its TTL (1m)", pttl)
		}
		rdb.PExpire(ctx, k.Lock, time.Hour)
		got, err = acquireAs(rdb, k, tokenA, time.Minute, p1)
		must(t, got, err, 3)
		if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl <= 59*time.Minute {
			t.Fatalf("PTTL = %v after a standing request's retry, want the hour kept", pttl)
		}
	})

	t.Run("expired holder", func(t *testing.T) {
		k := keys(t, "expired")
		got, err := acquire(rdb, k, tokenA, 20*time.Millisecond)
		must(t, got, err, 1)
		deadline := time.Now().Add(5 * time.Second)
		for {
			got, err = acquire(rdb, k, tokenB, time.Minute)
			if err != nil {
				t.Fatal(err)
			}
			if got > 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("still held (%d) long after the 20ms lease", got)
			}
			time.Sleep(10 * time.Millisecond)
		}
		must(t, got, nil, 2)
	})
}

// TestMutexReserve: an acquisition may reserve a block of fencing tokens for hand-offs; the
// reply is the top of the block and the next acquisition starts above it.
func TestMutexReserve(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "reserve")
	got, err := acquireAs(rdb, k, tokenA, time.Minute, turnArgs{reserve: 4})
	must(t, got, err, 4)
	got, err = acquireAs(rdb, k, tokenA, time.Minute, turnArgs{reserve: 4}) // a retry reserves again
	must(t, got, err, 8)
	got, err = release(rdb, k, tokenA, "")
	must(t, got, err, 1)
	got, err = acquireAs(rdb, k, tokenB, time.Minute, turnArgs{reserve: 1})
	must(t, got, err, 9)
}

// TestMutexTurns: refused Locks queue their process once, with a standing request; a
// release grants the lock to the process that waited longest, or gives it the turn when
// its request has lapsed; a process that leaves passes on what it was given.
func TestMutexTurns(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "turns")
	sub := rdb.Subscribe(ctx, k.Channel)
	defer sub.Close()
	if _, err := sub.ReceiveTimeout(ctx, 5*time.Second); err != nil { // the confirmation
		t.Fatal(err)
	}
	message := func(want string) {
		t.Helper()
		msg, err := sub.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := msg.(*redis.Message); !ok || m.Payload != want {
			t.Fatalf("published %v, want %q", msg, want)
		}
	}
	wantList := func(want ...string) {
		t.Helper()
		if got := rdb.LRange(ctx, k.Turns, 0, -1).Val(); fmt.Sprint(got) != fmt.Sprint(want) {
			t.Fatalf("turn list = %v, want %v", got, want)
		}
	}
	const tokenC, tokenD = "cccccccccccccccccccccccccccccccc", "dddddddddddddddddddddddddddddddd"
	const tokenE, tokenF = "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee", "ffffffffffffffffffffffffffffffff"
	p1, p2, p3 := turnArgs{reserve: 1, me: "p1"}, turnArgs{reserve: 2, me: "p2"}, turnArgs{reserve: 1, me: "p3"}

	got, err := acquireAs(rdb, k, tokenA, time.Minute, p1)
	must(t, got, err, 1)
	for _, a := range []struct {
		token string
		p     turnArgs
	}{{tokenB, p2}, {tokenC, p3}, {tokenB, p2}} { // p2 twice: listed once
		if got, err := acquireAs(rdb, k, a.token, time.Minute, a.p); err != nil || got >= 0 {
			t.Fatalf("acquire of a held lock = %d, %v; want a refusal", got, err)
		}
	}
	try := turnArgs{reserve: 1, me: "p4", try: true}
	if got, err := acquireAs(rdb, k, tokenD, time.Minute, try); err != nil || got >= 0 {
		t.Fatalf("try of a held lock = %d, %v; want a refusal", got, err)
	}
	wantList("p2", "p3") // a try does not queue
	if ask := strings.Fields(rdb.HGet(ctx, k.Asks, "p2").Val()); len(ask) != 4 || ask[0] != tokenB || ask[1] != "60000" || ask[2] != "2" {
		t.Fatalf("p2's standing request = %q, want \"token ttl reserve expires\"", ask)
	}

	// The release grants p2's request: the lock is p2's, for at most the grant length,
	// with p2's reservation of two tokens.
	got, err = releaseTurn(rdb, k, tokenA, "PUBLISH", "20000")
	must(t, got, err, 1)
	message("grant:p2:" + tokenB + ":3:2")
	if v := rdb.Get(ctx, k.Lock).Val(); v != tokenB {
		t.Fatalf("lock = %q after the grant, want p2's token", v)
	}
	if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl <= 0 || pttl > 3*time.Second {
		t.Fatalf("granted PTTL = %v, want (0, 3s]", pttl)
	}
	wantList("p3")
	if rdb.HExists(ctx, k.Asks, "p2").Val() {
		t.Fatal("the granted request is still standing")
	}
	wantTombstoneFor(t, rdb, k.Gone, tokenB, 3*time.Second) // granted, for the grant length: served once
	// p2 confirms with its token: the lease is set to its TTL, with a fresh reservation.
	got, err = acquireAs(rdb, k, tokenB, time.Minute, p2)
	must(t, got, err, 5)
	if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl <= 3*time.Second {
		t.Fatalf("PTTL = %v after the confirmation, want the full minute", pttl)
	}

	// p3's request has lapsed (it stopped refreshing): the release promises it the lock,
	// and only p3 may take it.
	rdb.HSet(ctx, k.Asks, "p3", tokenC+" 60000 1 1")
	got, err = releaseTurn(rdb, k, tokenB, "PUBLISH", "20000")
	must(t, got, err, 1)
	message("turn:p3")
	if v := rdb.Get(ctx, k.Lock).Val(); v != "turn:p3" {
		t.Fatalf("lock = %q, want the promise to p3", v)
	}
	// p1's served token asks no more: p1 asks again with a new one.
	got, err = acquireAs(rdb, k, tokenA, time.Minute, p1)
	if err != nil || !Gone(got) {
		t.Fatalf("an attempt of p1's served token = %d, %v; want the gone reply", got, err)
	}
	wantList()
	if rdb.HExists(ctx, k.Asks, "p1").Val() {
		t.Fatal("an attempt of a served token made a standing request")
	}
	got, err = acquireAs(rdb, k, tokenE, time.Minute, p1)
	if err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, got, 20*time.Second, "turn:p3")
	wantList("p1")
	got, err = acquireAs(rdb, k, tokenC, time.Minute, p3)
	must(t, got, err, 6)
	if v := rdb.Get(ctx, k.Lock).Val(); v != tokenC {
		t.Fatalf("lock = %q after p3 took its turn", v)
	}

	// p1 is granted as it gives up: leaving passes the lock on, to no one (the list is
	// empty), which says "released" for the waiters that take no turns (MultiMutex).
	got, err = releaseTurn(rdb, k, tokenC, "PUBLISH", "20000")
	must(t, got, err, 1)
	message("grant:p1:" + tokenE + ":7:1")
	got, err = leaveTurns(rdb, k, "p1", tokenE)
	must(t, got, err, 1)
	message("released")
	if rdb.Exists(ctx, k.Lock).Val() != 0 {
		t.Fatal("the lock granted to a process that left is still held")
	}
	// A process that had the turn passes it on; one that had nothing changes nothing.
	rdb.RPush(ctx, k.Turns, "p6")
	rdb.Set(ctx, k.Lock, "turn:p5", time.Minute)
	got, err = leaveTurns(rdb, k, "p5", "")
	must(t, got, err, 1)
	message("turn:p6")
	got, err = leaveTurns(rdb, k, "p7", "")
	must(t, got, err, 0)
	wantList()
	// A leave that comes late, after a newer waiter of the same process asked with another
	// token, leaves that waiter's place alone.
	rdb.RPush(ctx, k.Turns, "p8")
	rdb.HSet(ctx, k.Asks, "p8", tokenD+" 60000 1 99999999999999")
	got, err = leaveTurns(rdb, k, "p8", tokenC)
	must(t, got, err, 0)
	wantList("p8")
	got, err = leaveTurns(rdb, k, "p8", tokenD)
	must(t, got, err, 0)
	wantList()
	wantTombstoneFor(t, rdb, k.Gone, tokenD, 0) // left: an attempt of it landing later takes nothing
	if rdb.HExists(ctx, k.Asks, "p8").Val() {
		t.Fatal("the leaving process's request is still standing")
	}
	if v := rdb.Get(ctx, k.Lock).Val(); v != "turn:p6" {
		t.Fatalf("lock = %q, want the promise to p6", v)
	}
	rdb.Del(ctx, k.Lock)

	// Without turns (a quorum), the list is left alone and the release wakes everyone.
	got, err = acquire(rdb, k, tokenF, time.Minute)
	must(t, got, err, 8)
	rdb.RPush(ctx, k.Turns, "p9")
	got, err = release(rdb, k, tokenF, "PUBLISH")
	must(t, got, err, 1)
	message("released")
	wantList("p9")
}

func TestMutexRelease(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "release")
	sub := rdb.Subscribe(ctx, k.Channel)
	defer sub.Close()
	if _, err := sub.ReceiveTimeout(ctx, 5*time.Second); err != nil { // the confirmation
		t.Fatal(err)
	}

	got, err := acquire(rdb, k, tokenA, time.Minute)
	must(t, got, err, 1)

	got, err = release(rdb, k, tokenB, "PUBLISH")
	must(t, got, err, 0)
	if v := rdb.Get(ctx, k.Lock).Val(); v != tokenA {
		t.Fatalf("a release with the wrong token changed the key to %q", v)
	}

	got, err = release(rdb, k, tokenA, "PUBLISH")
	must(t, got, err, 1)
	if rdb.Exists(ctx, k.Lock).Val() != 0 {
		t.Fatal("the key is still there after release")
	}
	if rdb.Get(ctx, k.Fence).Val() != "1" {
		t.Fatal("release touched the fence counter")
	}
	msg, err := sub.ReceiveTimeout(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := msg.(*redis.Message); !ok || m.Channel != k.Channel || m.Payload != "released" {
		t.Fatalf("received %#v, want a message %q on %q", msg, "released", k.Channel)
	}

	// Only one message: the refused release published nothing, and a second release of
	// the same token neither succeeds nor publishes.
	got, err = release(rdb, k, tokenA, "PUBLISH")
	must(t, got, err, 0)
	if err := rdb.Publish(ctx, k.Channel, "marker").Err(); err != nil {
		t.Fatal(err)
	}
	msg, err = sub.ReceiveTimeout(ctx, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if m, ok := msg.(*redis.Message); !ok || m.Payload != "marker" {
		t.Fatalf("received %#v, want only the marker", msg)
	}

	// An empty publish command releases without waking anyone.
	got, err = acquire(rdb, k, tokenB, time.Minute) // a fresh token: tokenA was served
	must(t, got, err, 2)
	got, err = release(rdb, k, tokenB, "")
	must(t, got, err, 1)
	if rdb.Exists(ctx, k.Lock).Val() != 0 {
		t.Fatal("the key is still there after a silent release")
	}
	rdb.Publish(ctx, k.Channel, "marker2")
	msg, err = sub.ReceiveTimeout(ctx, 5*time.Second)
	if m, ok := msg.(*redis.Message); err != nil || !ok || m.Payload != "marker2" {
		t.Fatalf("received %#v, %v; want only the marker: a silent release published", msg, err)
	}

	rdb.RPush(ctx, k.Lock, "x")
	_, err = release(rdb, k, tokenA, "PUBLISH")
	wantWrongType(t, err)
}

func TestMutexExtend(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "extend")

	got, err := extend(rdb, k, tokenA, time.Minute)
	must(t, got, err, 0) // no key
	if rdb.Exists(ctx, k.Lock).Val() != 0 {
		t.Fatal("extend created the key")
	}

	got, err = acquire(rdb, k, tokenA, 5*time.Second)
	must(t, got, err, 1)

	got, err = extend(rdb, k, tokenB, time.Hour)
	must(t, got, err, 0)
	if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl > 5*time.Second {
		t.Fatalf("a refused extend changed PTTL to %v", pttl)
	}

	got, err = extend(rdb, k, tokenA, time.Hour)
	must(t, got, err, 1)
	if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl < 59*time.Minute || pttl > time.Hour {
		t.Fatalf("PTTL after extend = %v, want about 1h", pttl)
	}
	// A renewal or an Extend that arrives after a longer one (sent later, landed first, or
	// sent before and delivered late) keeps the longer expiry: nothing shortens a key.
	got, err = extend(rdb, k, tokenA, 2*time.Second)
	must(t, got, err, 1)
	if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl < 59*time.Minute {
		t.Fatalf("PTTL after a shorter renewal = %v, want the hour kept", pttl)
	}
	if v := rdb.Get(ctx, k.Lock).Val(); v != tokenA {
		t.Fatalf("extend changed the token to %q", v)
	}

	rdb.Del(ctx, k.Lock)
	rdb.RPush(ctx, k.Lock, "x")
	_, err = extend(rdb, k, tokenA, time.Minute)
	wantWrongType(t, err)
}

func TestFenceRaise(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "fence")

	for _, step := range []struct{ to, want int64 }{
		{5, 5}, // from nothing
		{3, 5}, // never lowers
		{5, 5}, // equal
		{7, 7}, // raises
		{0, 7}, // never lowers
		{1e15, 1e15},
	} {
		got, err := raise(rdb, k, step.to)
		must(t, got, err, step.want)
		if v, _ := rdb.Get(ctx, k.Fence).Int64(); v != step.want {
			t.Fatalf("after raising to %d the counter is %d, want %d", step.to, v, step.want)
		}
	}
	if ttl := rdb.PTTL(ctx, k.Fence).Val(); ttl != -1*time.Nanosecond {
		t.Fatalf("fence PTTL = %v, want no expiry", ttl)
	}
	// The acquire script counts on from the raised value.
	got, err := acquire(rdb, k, tokenA, time.Minute)
	must(t, got, err, 1e15+1)
}

// TestCluster runs every script on a three-master Cluster with keys from keyspace.For: no
// CROSSSLOT errors, and the release is published with SPUBLISH on the key's shard.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	rdb := c.Client(t)

	masters := map[string]bool{}
	for i := range 12 {
		name := fmt.Sprintf("orders:%d", i)
		if i%3 == 0 {
			name = fmt.Sprintf("{tenant%d}:orders:%d", i, i)
		}
		k := keys(t, name)
		master, err := rdb.MasterForKey(ctx, k.Lock)
		if err != nil {
			t.Fatal(err)
		}
		masters[master.Options().Addr] = true

		sub := rdb.SSubscribe(ctx, k.Channel)
		if msg, err := sub.ReceiveTimeout(ctx, 5*time.Second); err != nil {
			t.Fatalf("%s: SSUBSCRIBE: %v", name, err)
		} else if s, ok := msg.(*redis.Subscription); !ok || s.Kind != "ssubscribe" {
			t.Fatalf("%s: got %#v, want the ssubscribe confirmation", name, msg)
		}

		got, err := acquire(rdb, k, tokenA, time.Minute)
		must(t, got, err, 1)
		got, err = acquire(rdb, k, tokenB, time.Minute)
		if err != nil || got >= 0 {
			t.Fatalf("%s: second acquire = %d, %v; want negative", name, got, err)
		}
		got, err = extend(rdb, k, tokenA, time.Minute)
		must(t, got, err, 1)
		got, err = raise(rdb, k, 10)
		must(t, got, err, 10)
		got, err = release(rdb, k, tokenA, "SPUBLISH")
		must(t, got, err, 1)

		msg, err := sub.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			t.Fatalf("%s: no sharded message: %v", name, err)
		}
		if m, ok := msg.(*redis.Message); !ok || m.Channel != k.Channel || m.Payload != "released" {
			t.Fatalf("%s: received %#v, want %q on %q", name, msg, "released", k.Channel)
		}
		sub.Close()

		got, err = acquire(rdb, k, tokenB, time.Minute)
		must(t, got, err, 11)
	}
	if len(masters) < 2 {
		t.Fatalf("all keys landed on %d master(s); the test should cover several", len(masters))
	}
}

// subscriber listens on one channel: PUBLISH or SPUBLISH, as the deployment uses.
type subscriber func(t *testing.T, channel string) *redis.PubSub

func standaloneSub(rdb *redis.Client) subscriber {
	return func(t *testing.T, channel string) *redis.PubSub {
		t.Helper()
		return confirmed(t, rdb.Subscribe(ctx, channel))
	}
}

func clusterSub(rdb *redis.ClusterClient) subscriber {
	return func(t *testing.T, channel string) *redis.PubSub {
		t.Helper()
		return confirmed(t, rdb.SSubscribe(ctx, channel))
	}
}

func confirmed(t *testing.T, ps *redis.PubSub) *redis.PubSub {
	t.Helper()
	t.Cleanup(func() { _ = ps.Close() })
	if _, err := ps.ReceiveTimeout(ctx, 5*time.Second); err != nil {
		t.Fatalf("subscription not confirmed: %v", err)
	}
	return ps
}

func receive(t *testing.T, ps *redis.PubSub, channel, payload string) {
	t.Helper()
	msg, err := ps.ReceiveTimeout(ctx, 5*time.Second)
	if err != nil {
		t.Fatalf("no message on %s: %v", channel, err)
	}
	if m, ok := msg.(*redis.Message); !ok || m.Channel != channel || m.Payload != payload {
		t.Fatalf("received %#v, want %q on %q", msg, payload, channel)
	}
}

const (
	ttlArg  = "60000"
	waitArg = "60000"
)

// exerciseFair runs the fair mutex scripts with the root package's key layout: a holder,
// a queued waiter that is handed the lock inside the release, and a waiter that leaves.
func exerciseFair(t *testing.T, rdb redis.Scripter, sub subscriber, publish string, k keyspace.Keys) {
	t.Helper()
	keys := fairKeys(k)
	granted := k.GrantedPrefix()
	run := func(s *redis.Script, args ...any) (int64, error) { return s.Run(ctx, rdb, keys, args...).Int64() }

	got, err := run(FairAcquire, tokenA, ttlArg, waitArg, "0")
	must(t, got, err, 1)
	got, err = run(FairAcquire, tokenA, ttlArg, waitArg, "0") // a retry
	must(t, got, err, 1)
	got, err = run(FairAcquire, tokenB, ttlArg, waitArg, "1") // a try does not queue
	if err != nil || got >= 0 {
		t.Fatalf("try on a held fair mutex: %d, %v", got, err)
	}
	const tokenC = "cccccccccccccccccccccccccccccccc"
	for _, tok := range []string{tokenB, tokenC, tokenB} { // B queues once, then C
		if got, err = run(FairAcquire, tok, ttlArg, waitArg, "0"); err != nil || got >= 0 {
			t.Fatalf("acquire of a held fair mutex: %d, %v", got, err)
		}
	}
	ps := sub(t, granted+tokenB)
	got, err = run(FairRelease, tokenC, waitArg, granted, publish, "release") // not the holder
	must(t, got, err, 0)
	got, err = run(FairRelease, tokenA, waitArg, granted, publish, "release")
	must(t, got, err, 1)
	receive(t, ps, granted+tokenB, "grant:"+tokenB+":"+tokenB+":2:1")
	got, err = run(FairAcquire, tokenB, ttlArg, waitArg, "0") // B confirms the hand-over
	must(t, got, err, 2)
	got, err = run(FairRelease, tokenC, waitArg, granted, publish, "leave") // C gives up
	must(t, got, err, 1)
	got, err = run(FairRelease, tokenB, waitArg, granted, publish, "release") // nobody waits
	must(t, got, err, 1)
	if n, _ := s(rdb).Exists(ctx, k.Lock).Result(); n != 0 {
		t.Fatal("the fair mutex is still held with nobody waiting")
	}
	got, err = run(FairAcquire, tokenC, ttlArg, waitArg, "0") // C's attempt, landing late
	if err != nil || !Gone(got) {
		t.Fatalf("an attempt after its waiter left: %d, %v; want the gone reply", got, err)
	}
	got, err = run(FairAcquire, tokenB, ttlArg, waitArg, "0") // B's, after B was served
	if err != nil || !Gone(got) {
		t.Fatalf("an attempt after its waiter was served: %d, %v; want the gone reply", got, err)
	}
	if n, _ := s(rdb).Exists(ctx, k.Lock, k.Queue()).Result(); n != 0 {
		t.Fatal("a late attempt of a waiter served or gone took the lock or queued again")
	}
	const tokenD = "dddddddddddddddddddddddddddddddd"
	got, err = run(FairAcquire, tokenD, ttlArg, waitArg, "0")
	must(t, got, err, 3)
}

// exerciseRW runs the RWMutex scripts: readers share, a writer waits for them and keeps new
// readers out, a writer that leaves lets them in again.
func exerciseRW(t *testing.T, rdb redis.Scripter, sub subscriber, publish string, k keyspace.Keys) {
	t.Helper()
	keys := rwKeys(k)
	readers, extendKeys, writers := readerKeys(k), memberExtendKeys(readerKeys(k), k), writerLeaveKeys(k)
	const r1, r2, w1, w2 = "reader1", "reader2", "writer1", "writer2"

	got, err := RwReadAcquire.Run(ctx, rdb, keys, r1, ttlArg, "").Int64()
	must(t, got, err, 1)
	got, err = RwReadAcquire.Run(ctx, rdb, keys, r2, ttlArg, "").Int64()
	must(t, got, err, 2)
	got, err = RwWriteAcquire.Run(ctx, rdb, keys, w1, ttlArg, "writer-id", waitArg, "0", "1").Int64()
	if err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, got, time.Minute, "") // readers: no single holder
	got, err = RwReadAcquire.Run(ctx, rdb, keys, "reader3", ttlArg, "").Int64()
	must(t, got, err, 0) // a waiting writer keeps new readers out
	got, err = MemberExtend.Run(ctx, rdb, extendKeys, r1, "120000").Int64()
	must(t, got, err, 1)
	got, err = MemberExtend.Run(ctx, rdb, extendKeys, "nobody", "120000").Int64()
	must(t, got, err, 0)

	ps := sub(t, k.Channel)
	got, err = WaiterLeave.Run(ctx, rdb, writers, "writer-id", k.Channel, publish).Int64()
	must(t, got, err, 1)
	receive(t, ps, k.Channel, "left")
	got, err = RwReadAcquire.Run(ctx, rdb, keys, "reader3", ttlArg, "").Int64()
	must(t, got, err, 3)
	for _, r := range []string{r1, r2, "reader3"} {
		got, err = MemberRelease.Run(ctx, rdb, readers, r, k.Channel, publish).Int64()
		must(t, got, err, 1)
		receive(t, ps, k.Channel, "released")
	}
	got, err = MemberRelease.Run(ctx, rdb, readers, r1, k.Channel, publish).Int64()
	must(t, got, err, 0)
	got, err = RwWriteAcquire.Run(ctx, rdb, keys, w2, ttlArg, "writer-id", waitArg, "0", "1").Int64()
	if err != nil || !Gone(got) { // the id left: never listed again, never served
		t.Fatalf("a writer's attempt after its leave: %d, %v; want the gone reply", got, err)
	}
	got, err = RwWriteAcquire.Run(ctx, rdb, keys, w2, ttlArg, "writer-id2", waitArg, "0", "1").Int64()
	must(t, got, err, 4)
	got, err = RwReadAcquire.Run(ctx, rdb, keys, r1, ttlArg, w2).Int64() // r1 read and released before
	if err != nil || !Gone(got) {
		t.Fatalf("a reader's token served before, its hold released: %d, %v; want the gone reply", got, err)
	}
	got, err = RwReadAcquire.Run(ctx, rdb, keys, "reader4", ttlArg, w2).Int64() // downgrade
	must(t, got, err, 5)
	got, err = RwReadAcquire.Run(ctx, rdb, keys, r2, ttlArg, "").Int64()
	if err != nil || got >= 0 {
		t.Fatalf("read acquire under a writer: %d, %v", got, err)
	}
}

// exerciseSemaphore runs the Semaphore scripts: permits are counted, requests wait in order,
// a released holder's permits come back.
func exerciseSemaphore(t *testing.T, rdb redis.Scripter, sub subscriber, publish string, k keyspace.Keys) {
	t.Helper()
	holders := k.Lock
	keys := semaphoreKeys(k)
	members, extendKeys := holderKeys(k), memberExtendKeys(holderKeys(k), k)
	acq := func(token string, n int, waiter string, try bool) (int64, error) {
		return SemaphoreAcquire.Run(ctx, rdb, keys, token, ttlArg, 3, n, waiter, waitArg, map[bool]string{true: "1", false: "0"}[try], k.Channel, publish).Int64()
	}
	got, err := acq("h1", 2, "w1", false)
	must(t, got, err, 1)
	got, err = acq("h2", 2, "w2", false) // 2 + 2 > 3: waits, first in line
	if err != nil || got > 0 {
		t.Fatalf("over-size acquire: %d, %v", got, err)
	}
	got, err = acq("h3", 1, "w3", false) // would fit, but w2 is ahead
	if err != nil || got > 0 {
		t.Fatalf("acquire behind a waiting request: %d, %v", got, err)
	}
	got, err = MemberExtend.Run(ctx, rdb, extendKeys, "h1", "120000").Int64()
	must(t, got, err, 1)
	end := zscore(t, rdb, holders, "h1")
	got, err = MemberExtend.Run(ctx, rdb, extendKeys, "h1", "1000").Int64() // a late, shorter renewal or Extend
	must(t, got, err, 1)
	if now := zscore(t, rdb, holders, "h1"); now != end {
		t.Fatalf("a shorter renewal moved the lease end from %v to %v; renewals only lengthen", end, now)
	}
	got, err = MemberRelease.Run(ctx, rdb, members, "h1", k.Channel, publish).Int64()
	must(t, got, err, 1)
	ps := sub(t, k.Channel)
	got, err = acq("h2", 2, "w2", false)
	must(t, got, err, 2)
	receive(t, ps, k.Channel, "next") // a permit remains and w3 waits: it is told
	got, err = acq("h3", 1, "w3", false)
	must(t, got, err, 3)
	got, err = acq("h4", 1, "w4", true)
	if err != nil || got > 0 {
		t.Fatalf("try on a full semaphore: %d, %v", got, err)
	}
	got, err = WaiterLeave.Run(ctx, rdb, queueLeaveKeys(k), "w4", k.Channel, publish).Int64()
	must(t, got, err, 0) // a try never queued
}

// s returns a client that can run plain commands: the tests pass *redis.Client or
// *redis.ClusterClient as Scripter.
func s(rdb redis.Scripter) redis.Cmdable { return rdb.(redis.Cmdable) }

func TestLockKinds(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	sub := standaloneSub(rdb)
	t.Run("fair", func(t *testing.T) { exerciseFair(t, rdb, sub, "PUBLISH", keys(t, "fair")) })
	t.Run("rw", func(t *testing.T) { exerciseRW(t, rdb, sub, "PUBLISH", keys(t, "rw")) })
	t.Run("semaphore", func(t *testing.T) { exerciseSemaphore(t, rdb, sub, "PUBLISH", keys(t, "sem")) })
}

// TestLockKindsCluster runs the same on a three-master Cluster with SPUBLISH: every key
// and channel of a lock shares its slot, so no script fails with CROSSSLOT.
func TestLockKindsCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	rdb := c.Client(t)
	sub := clusterSub(rdb)
	for i, name := range []string{"a", "b", "c", "{tenant}:d"} {
		t.Run(name, func(t *testing.T) {
			exerciseFair(t, rdb, sub, "SPUBLISH", keys(t, "fair:"+name))
			exerciseRW(t, rdb, sub, "SPUBLISH", keys(t, "rw:"+name))
			exerciseSemaphore(t, rdb, sub, "SPUBLISH", keys(t, fmt.Sprintf("sem:%s:%d", name, i)))
		})
	}
}

// TestSemaphoreManyExpired: the permits of thousands of holders that expired at once all
// come back (Lua's unpack has a limit of a few thousand values).
func TestSemaphoreManyExpired(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "big")
	holders, permits := k.Lock, k.Permits()
	const size = 10_000
	pipe := rdb.Pipeline()
	for i := range size {
		token := "h" + strconv.Itoa(i)
		pipe.ZAdd(ctx, holders, redis.Z{Score: 1, Member: token}) // ended long ago
		pipe.HSet(ctx, permits, token, 1)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	keys := semaphoreKeys(k)
	got, err := SemaphoreAcquire.Run(ctx, rdb, keys, "x", ttlArg, size, size, "w", waitArg, "0", k.Channel, "PUBLISH").Int64()
	must(t, got, err, 1)
	if n := rdb.HLen(ctx, permits).Val(); n != 1 {
		t.Fatalf("%d permit entries left, want only the new holder's", n)
	}
}
