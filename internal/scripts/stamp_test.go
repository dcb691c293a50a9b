package scripts

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// stampAcquireKeys are stamp_acquire's KEYS, as the engine gives them (timestamp.go).
func stampAcquireKeys(k keyspace.Keys) []string {
	return []string{k.Lock, k.Fence, k.Gone}
}

// stampID is a TimestampMutex attempt's id as the engine makes them (32 lowercase hex
// digits), the n-th of a test: a fresh attempt has a fresh id; every copy of one attempt
// (a resend, a copy landing late) has the same.
func stampID(n int) string { return fmt.Sprintf("%032x", n) }

// stampAcq runs stamp_acquire as the attempt id (its tombstone's name) of a client whose
// clock reads clock, writing deadline with an expiry of ttl. It alone knows the ARGV
// layout.
func stampAcq(rdb redis.Scripter, k keyspace.Keys, id string, clock, deadline int64, ttl time.Duration) (int64, error) {
	return StampAcquire.Run(ctx, rdb, stampAcquireKeys(k), clock, deadline, ttl.Milliseconds(), id).Int64()
}

// runStampAcquire runs stamp_acquire as the attempt id of a client whose clock reads now,
// for a lease of ttl.
func runStampAcquire(rdb redis.Scripter, k keyspace.Keys, id string, now time.Time, ttl time.Duration) (int64, error) {
	return stampAcq(rdb, k, id, now.UnixMilli(), now.Add(ttl).UnixMilli(), ttl)
}

// stampExtendKeys are stamp_extend's KEYS, as the engine gives them (timestamp.go).
func stampExtendKeys(k keyspace.Keys) []string {
	return []string{k.Lock, k.Gone}
}

// runStampExtend runs stamp_extend on k as a hold acquired by the attempt id (its
// tombstone's name, which the call serves again) and that may find a deadline of owned in
// the key: writing deadline, for a lease of ttl. It alone knows the ARGV layout.
func runStampExtend(rdb redis.Scripter, k keyspace.Keys, deadline int64, ttl time.Duration, id string, owned ...int64) (int64, error) {
	args := []any{deadline, ttl.Milliseconds(), id}
	for _, o := range owned {
		args = append(args, o)
	}
	return StampExtend.Run(ctx, rdb, stampExtendKeys(k), args...).Int64()
}

// stampReleaseKeys are stamp_release's KEYS, as the engine gives them (timestamp.go).
func stampReleaseKeys(k keyspace.Keys) []string {
	return []string{k.Lock}
}

// runStampRelease runs stamp_release on k, publishing on k.Channel with publish, owning
// the deadlines owned.
func runStampRelease(rdb redis.Scripter, k keyspace.Keys, publish string, owned ...int64) (int64, error) {
	args := []any{k.Channel, publish}
	for _, o := range owned {
		args = append(args, o)
	}
	return StampRelease.Run(ctx, rdb, stampReleaseKeys(k), args...).Int64()
}

func getInt(t *testing.T, rdb *redis.Client, key string) int64 {
	t.Helper()
	v, err := rdb.Get(ctx, key).Int64()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// TestStampAcquire: stamp_acquire takes a free key or one whose deadline has passed by
// the caller's clock, refuses a held one with the time left, undoes a take whose fencing
// counter is broken, and refuses a key that holds no deadline.
func TestStampAcquire(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	now := time.Now()
	for _, tc := range []struct {
		name string
		run  func(t *testing.T, rdb *redis.Client, now time.Time)
	}{
		{"free key takes the deadline, an expiry and a fence", stampAcquireFree},
		{"held key refuses with the time to its deadline by the caller's clock", stampAcquireHeld},
		{"passed deadline is taken over", stampAcquirePassed},
		{"broken fence undoes the take", stampAcquireBrokenFence},
		{"a value that is not a deadline is an error and is left alone", stampAcquireNotDeadline},
	} {
		t.Run(tc.name, func(t *testing.T) { tc.run(t, rdb, now) })
	}
}

// stampAcquireFree: free key takes the deadline, an expiry and a fence; the attempt's id,
// a token served once, is a tombstone then, and a copy of that call takes nothing once
// its hold ended.
func stampAcquireFree(t *testing.T, rdb *redis.Client, now time.Time) {
	k := keys(t, "stamp:free")
	for want := int64(1); want <= 2; want++ {
		clock := now.Add(time.Duration(want) * time.Millisecond) // a fresh deadline for each hold
		deadline := clock.Add(time.Minute).UnixMilli()
		got, err := runStampAcquire(rdb, k, stampID(int(want)), clock, time.Minute)
		must(t, got, err, want)
		if v := getInt(t, rdb, k.Lock); v != deadline {
			t.Fatalf("key holds %d, want the deadline %d", v, deadline)
		}
		if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl <= 59*time.Second || pttl > time.Minute {
			t.Fatalf("PTTL = %v, want about the lease length", pttl)
		}
		wantTombstoneFor(t, rdb, k.Gone, stampID(int(want)), time.Minute)
		rdb.Del(ctx, k.Lock)
	}
	got, err := runStampAcquire(rdb, k, stampID(1), now.Add(time.Millisecond), time.Minute) // the first hold's call again
	if err != nil || !Gone(got) {
		t.Fatalf("a copy of a call whose hold ended = %d, %v; want the gone reply", got, err)
	}
	if rdb.Exists(ctx, k.Lock).Val() != 0 || rdb.Get(ctx, k.Fence).Val() != "2" {
		t.Fatalf("a gone attempt wrote: key exists %d, fence %s", rdb.Exists(ctx, k.Lock).Val(), rdb.Get(ctx, k.Fence).Val())
	}
}

// stampAcquireHeld: held key refuses with the time to its deadline by the caller's clock.
func stampAcquireHeld(t *testing.T, rdb *redis.Client, now time.Time) {
	k := keys(t, "stamp:held")
	rdb.Set(ctx, k.Lock, now.Add(10*time.Second).UnixMilli(), 0) // a legacy holder: no expiry
	got, err := runStampAcquire(rdb, k, tokenA, now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := Refusal(got); got > 0 || left < 10*time.Second || left > 10*time.Second+time.Millisecond {
		t.Fatalf("reply %d (%v left), want a refusal with 10s left", got, left)
	}
	rdb.PExpire(ctx, k.Lock, 2*time.Second) // an expiry sooner than the deadline
	got, _ = runStampAcquire(rdb, k, tokenB, now, time.Minute)
	wantRefusal(t, got, 2*time.Second, rdb.Get(ctx, k.Lock).Val())
	if rdb.Exists(ctx, k.Fence).Val() != 0 {
		t.Fatal("a refused acquire raised the fence")
	}
	wantNoTombstones(t, rdb, k.Gone) // a refused acquire serves no id
}

// stampAcquirePassed: passed deadline is taken over.
func stampAcquirePassed(t *testing.T, rdb *redis.Client, now time.Time) {
	k := keys(t, "stamp:passed")
	rdb.Set(ctx, k.Lock, now.Add(-time.Millisecond).UnixMilli(), 0)
	got, err := runStampAcquire(rdb, k, tokenA, now, time.Minute)
	must(t, got, err, 1)
	if v := getInt(t, rdb, k.Lock); v != now.Add(time.Minute).UnixMilli() {
		t.Fatalf("key holds %d after a takeover, want the new deadline", v)
	}
	if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl <= 0 {
		t.Fatalf("PTTL = %v after a takeover, want the lease length", pttl)
	}
	rdb.Set(ctx, k.Lock, now.UnixMilli(), 0)                       // the deadline is now: not passed yet
	got, err = runStampAcquire(rdb, k, tokenB, now, 2*time.Minute) // a fresh attempt and deadline
	if err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, got, time.Millisecond, strconv.FormatInt(now.UnixMilli(), 10)) // a deadline equal to the caller's clock is not taken over
}

// stampAcquireBrokenFence: broken fence undoes the take.
func stampAcquireBrokenFence(t *testing.T, rdb *redis.Client, now time.Time) {
	k := keys(t, "stamp:undo")
	rdb.Set(ctx, k.Fence, "not a number", 0)
	if _, err := runStampAcquire(rdb, k, tokenA, now, time.Minute); err == nil {
		t.Fatal("no error with a broken fence")
	}
	if rdb.Exists(ctx, k.Lock).Val() != 0 {
		t.Fatal("a free key was left taken")
	}
	old := now.Add(-time.Second).UnixMilli()
	rdb.Set(ctx, k.Lock, old, 30*time.Second)
	if _, err := runStampAcquire(rdb, k, tokenB, now, time.Minute); err == nil {
		t.Fatal("no error with a broken fence")
	}
	if v, pttl := getInt(t, rdb, k.Lock), rdb.PTTL(ctx, k.Lock).Val(); v != old || pttl <= 0 || pttl > 30*time.Second {
		t.Fatalf("key holds %d with PTTL %v after an undone takeover, want %d with its expiry", v, pttl, old)
	}
	wantNoTombstones(t, rdb, k.Gone) // an undone take serves no id
}

// stampAcquireNotDeadline: a value that is not a deadline is an error and is left alone.
func stampAcquireNotDeadline(t *testing.T, rdb *redis.Client, now time.Time) {
	k := keys(t, "stamp:bad")
	for value, why := range map[string]string{
		"hello": `"hello", which is not a unix-ms deadline`, "": `""`,
		"1700000000": "looks like unix seconds", "-1700000000000": `"-1700000000000"`,
		"1700000000000.0": `"1700000000000.0"`, "1234567890123456": `"1234567890123456"`,
		" 1700000000000": `" 1700000000000"`, "\x00\n": `"??"`,
	} {
		rdb.Set(ctx, k.Lock, value, 0)
		_, err := runStampAcquire(rdb, k, tokenA, now, time.Minute)
		if !redis.HasErrorPrefix(err, "NOTSTAMP") || !strings.Contains(err.Error(), why) {
			t.Errorf("value %q: %v, want NOTSTAMP saying %q", value, err, why)
		}
		if v := rdb.Get(ctx, k.Lock).Val(); v != value {
			t.Errorf("value %q changed to %q", value, v)
		}
	}
	rdb.Del(ctx, k.Lock)
	rdb.RPush(ctx, k.Lock, "x")
	_, err := runStampAcquire(rdb, k, tokenA, now, time.Minute)
	wantWrongType(t, err)
}

// TestStampExtend: stamp_extend lengthens a key that holds one of the hold's deadlines
// (ARGV[4..]) and serves the id of the attempt that acquired it (ARGV[3]) for the lease; it
// only lengthens, and changes nothing on a key that holds none of them.
func TestStampExtend(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	now := time.Now()
	d0, d1, d2 := now.Add(10*time.Second).UnixMilli(), now.Add(20*time.Second).UnixMilli(), now.Add(30*time.Second).UnixMilli()
	k := keys(t, "ext")
	lock := k.Lock

	// The hold acquired with d0, as the attempt tokenA.
	got, err := runStampExtend(rdb, k, d1, time.Minute, tokenA, d0)
	must(t, got, err, 0) // no key
	if rdb.Exists(ctx, lock).Val() != 0 {
		t.Fatal("extend created the key")
	}
	rdb.Set(ctx, lock, d0, 10*time.Second)
	got, err = runStampExtend(rdb, k, d1, time.Minute, tokenB, d2) // another hold's: not among its own
	must(t, got, err, 0)
	if v := getInt(t, rdb, lock); v != d0 {
		t.Fatalf("a refused extend changed the deadline to %d", v)
	}
	wantNoTombstones(t, rdb, k.Gone) // a refused extend serves no id

	got, err = runStampExtend(rdb, k, d2, 30*time.Second, tokenA, d1, d0) // any of its own counts
	must(t, got, err, 1)
	if v, pttl := getInt(t, rdb, lock), rdb.PTTL(ctx, lock).Val(); v != d2 || pttl <= 29*time.Second {
		t.Fatalf("after extend: %d, PTTL %v; want %d, about 30s", v, pttl, d2)
	}
	// The acquisition's id is kept a tombstone until the lease's end and GONE_MS.
	wantTombstoneFor(t, rdb, k.Gone, tokenA, 30*time.Second)
	// An older renewal landing late keeps the later deadline and expiry, and the tombstone.
	got, err = runStampExtend(rdb, k, d1, 20*time.Second, tokenA, d0, d2)
	must(t, got, err, 1)
	if v, pttl := getInt(t, rdb, lock), rdb.PTTL(ctx, lock).Val(); v != d2 || pttl <= 29*time.Second {
		t.Fatalf("after a late, shorter renewal: %d, PTTL %v; want %d kept, about 30s", v, pttl, d2)
	}
	wantTombstoneFor(t, rdb, k.Gone, tokenA, 30*time.Second) // never shortened
	// An Extend to a shorter TTL keeps them too: shortening is the client's alone.
	got, err = runStampExtend(rdb, k, d0, 10*time.Second, tokenA, d2)
	must(t, got, err, 1)
	if v, pttl := getInt(t, rdb, lock), rdb.PTTL(ctx, lock).Val(); v != d2 || pttl <= 29*time.Second {
		t.Fatalf("after a shorter Extend: %d, PTTL %v; want %d kept, about 30s", v, pttl, d2)
	}
	// A key someone made persistent stays so while its deadline moves.
	d3 := now.Add(40 * time.Second).UnixMilli()
	rdb.Persist(ctx, lock)
	got, err = runStampExtend(rdb, k, d3, 10*time.Second, tokenA, d2)
	must(t, got, err, 1)
	if v, pttl := getInt(t, rdb, lock), rdb.PTTL(ctx, lock).Val(); v != d3 || pttl != -1*time.Nanosecond {
		t.Fatalf("persistent key: %d, PTTL %v; want %d, no expiry", v, pttl, d3)
	}

	rdb.Del(ctx, lock)
	rdb.RPush(ctx, lock, "x")
	_, err = runStampExtend(rdb, k, d1, time.Minute, tokenA, d0)
	wantWrongType(t, err)
}

// TestStampAcquisitionServedByEveryExtend: a TimestampMutex hold's tombstone is that of the
// attempt that acquired it (id), which wrote the deadline da. The hold stops owning da
// once the key can no longer hold it (twice the lease after it was written), yet every
// extend names id (ARGV[3]) and keeps its tombstone until the lease's end and GONE_MS,
// however long ago the hold acquired. So once the hold is released, a copy of its
// acquisition landing late is refused as gone and writes nothing, and a late Extend to an
// hour, among whose owned deadlines da is, finds nothing of the hold's.
func TestStampAcquisitionServedByEveryExtend(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	s := newServedRig(t, rdb, "stamp-served")
	da, id := s.deadline, tokenA
	str := func(d int64) string { return strconv.FormatInt(d, 10) }

	got, err := stampAcq(rdb, s.k, id, s.clock, da, lateTTL)
	must(t, got, err, 1)
	s.wantServed(t, id, lateTTL)
	// Renewals, each writing a later deadline, the last an Extend to two minutes; from the
	// second on, the deadlines owned no longer include da.
	d1, d2, d3 := da+1_000, da+2_000, da+120_000
	for _, ext := range []struct {
		deadline int64
		ttl      time.Duration
		owned    []int64
	}{
		{d1, lateTTL, []int64{da}},
		{d2, lateTTL, []int64{d1}},
		{d3, 2 * time.Minute, []int64{d1, d2}},
	} {
		ageTombstone(t, rdb, s.k.Gone, id) // what it would be, with no extend to keep it
		got, err = runStampExtend(rdb, s.k, ext.deadline, ext.ttl, id, ext.owned...)
		must(t, got, err, 1)
		s.wantValue(t, s.k.Lock, str(ext.deadline))
		s.wantServed(t, id, ext.ttl)
	}
	got, err = runStampRelease(rdb, s.k, "", d2, d3)
	must(t, got, err, 1)
	s.wantGone(t, s.k.Lock)
	s.wantServed(t, id, 2*time.Minute) // the release leaves it

	before := s.snapshot(t)
	got, err = stampAcq(rdb, s.k, id, s.clock, da, lateTTL) // a copy of the acquisition, landing late
	if err != nil || !Gone(got) {
		t.Fatalf("late acquisition = %d, %v; want the gone reply", got, err)
	}
	s.unchanged(t, before, "the late acquisition")
	got, err = runStampExtend(rdb, s.k, da+3_600_000, time.Hour, id, da) // an early Extend(1h), landing late
	must(t, got, err, 0)
	s.unchanged(t, before, "the late Extend")
}

func TestStampRelease(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	d0, d1 := time.Now().Add(time.Minute).UnixMilli(), time.Now().Add(2*time.Minute).UnixMilli()
	k := keys(t, "rel")
	lock := k.Lock
	sub := rdb.Subscribe(ctx, k.Channel)
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	rdb.Set(ctx, lock, d1, 0)
	got, err := runStampRelease(rdb, k, "PUBLISH", d0)
	must(t, got, err, 0)
	if v := getInt(t, rdb, lock); v != d1 {
		t.Fatalf("a release of another's deadline changed the key to %d", v)
	}
	got, err = runStampRelease(rdb, k, "", d0, d1) // quiet: wakes no one
	must(t, got, err, 1)
	rdb.Set(ctx, lock, d0, 0)
	got, err = runStampRelease(rdb, k, "PUBLISH", d0)
	must(t, got, err, 1)
	if rdb.Exists(ctx, lock).Val() != 0 {
		t.Fatal("release left the key")
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != "released" {
		t.Fatalf("message %v, %v; want one \"released\" (the quiet release publishes nothing)", msg, err)
	}

	rdb.RPush(ctx, lock, "x")
	_, err = runStampRelease(rdb, k, "PUBLISH", d0)
	wantWrongType(t, err)
}

// deadlineForm is what stamp_acquire.lua accepts as a deadline.
var deadlineForm = regexp.MustCompile(`^[0-9]{1,15}$`)

// FuzzStampDeadline: stamp_acquire.lua reads a value as a deadline exactly when it is 1 to
// 15 decimal digits worth at least 10^11, and then as that number of milliseconds: it
// refuses for a deadline ahead of the caller's clock and takes over one behind it.
// Anything else is NOTSTAMP, and the key is left as it was.
func FuzzStampDeadline(f *testing.F) {
	rdb := redistest.Start(f).Client(f)
	now := time.Now()
	for _, seed := range []string{
		"hello", "", "1700000000", "99999999999", "100000000000", "-1700000000000",
		"1700000000000.5", "+1700000000000", "0x18bcfe56800", "1e13", "999999999999999",
		"1000000000000000", strconv.FormatInt(now.UnixMilli()+60000, 10), strconv.FormatInt(now.UnixMilli()-1, 10),
		"\xff\xfe", "17000000 00000", "١٧٠٠٠٠٠٠٠٠٠٠٠",
	} {
		f.Add(seed)
	}
	k := keys(f, "stamp:fuzz")
	f.Fuzz(func(t *testing.T, value string) {
		rdb.Set(ctx, k.Lock, value, 0)
		// Each value on a lock of its own: no tombstone of the last's attempt.
		defer rdb.Del(ctx, k.Lock, k.Fence, tombstoneKey(k.Gone, tokenA))
		got, err := runStampAcquire(rdb, k, tokenA, now, time.Minute)
		d, perr := strconv.ParseInt(value, 10, 64)
		isDeadline := deadlineForm.MatchString(value) && perr == nil && d >= 1e11
		switch {
		case !isDeadline:
			if !redis.HasErrorPrefix(err, "NOTSTAMP") {
				t.Fatalf("value %q: reply %d, %v; want NOTSTAMP", value, got, err)
			}
			if v := rdb.Get(ctx, k.Lock).Val(); v != value {
				t.Fatalf("value %q changed to %q", value, v)
			}
		case err != nil:
			t.Fatalf("value %q: %v", value, err)
		case d < now.UnixMilli():
			if got != 1 {
				t.Fatalf("passed deadline %q: reply %d, want taken over", value, got)
			}
		default:
			if left, _ := Refusal(got); got > 0 || left.Milliseconds() != min(d-now.UnixMilli()+1, 1<<36) {
				t.Fatalf("deadline %q ahead: reply %d (%v left), want a refusal until it", value, got, left)
			}
		}
	})
}

// TestStampTombstoneNamedByAttemptNotDeadline: a TimestampMutex attempt's tombstone is
// named after its id, not its deadline: deadlines collide across clients (two with the
// same lease length writing in the same millisecond). Client A's attempt takes the free
// key and A releases it; client B's attempt, with the same clock and deadline but an id
// of its own, finds the key free and takes it: it is not refused as gone.
func TestStampTombstoneNamedByAttemptNotDeadline(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	s := newServedRig(t, rdb, "stamp-same-deadline")
	str := func(d int64) string { return strconv.FormatInt(d, 10) }

	got, err := stampAcq(rdb, s.k, tokenA, s.clock, s.deadline, lateTTL) // client A
	must(t, got, err, 1)
	got, err = runStampRelease(rdb, s.k, "", s.deadline)
	must(t, got, err, 1)
	s.wantGone(t, s.k.Lock)

	got, err = stampAcq(rdb, s.k, tokenB, s.clock, s.deadline, lateTTL) // client B: the same deadline
	if err != nil || Gone(got) || got != 2 {
		t.Fatalf("B's acquisition of the free key = %d, %v; want it acquired with counter 2 (gone reply: %v)", got, err, Gone(got))
	}
	s.wantValue(t, s.k.Lock, str(s.deadline))
	s.wantPTTL(t, s.k.Lock, lateTTL-tombstoneSlack, lateTTL)
	s.wantServed(t, tokenA, lateTTL) // A's release left its own
	s.wantServed(t, tokenB, lateTTL)
	s.wantOnlyTombstoneKeys(t)
}

// TestStampResendOfAttemptThatTookKey: a copy of an attempt that lands after the attempt
// itself took the key (a go-redis resend, on a new connection, of a call whose first
// reply was lost) succeeds: it replies the fencing counter as it is and writes nothing,
// neither the key's value nor its expiry nor the tombstone. Refused, it would leave the
// lock taken by no one until the key expired.
func TestStampResendOfAttemptThatTookKey(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	s := newServedRig(t, rdb, "stamp-resend")
	str := func(d int64) string { return strconv.FormatInt(d, 10) }

	if err := rdb.Set(ctx, s.k.Fence, 41, 0).Err(); err != nil { // earlier holds
		t.Fatal(err)
	}
	got, err := stampAcq(rdb, s.k, tokenA, s.clock, s.deadline, lateTTL) // the first copy
	must(t, got, err, 42)
	// A longer expiry and an older tombstone than the copy would write, so that any write
	// shows.
	if err := rdb.PExpire(ctx, s.k.Lock, otherLong).Err(); err != nil {
		t.Fatal(err)
	}
	ageTombstone(t, rdb, s.k.Gone, tokenA)
	before := s.snapshot(t)

	for i := 0; i < 2; i++ { // a resend, and another
		got, err = stampAcq(rdb, s.k, tokenA, s.clock, s.deadline, lateTTL)
		must(t, got, err, 42)
		s.unchanged(t, before, "the resend")
		s.wantValue(t, s.k.Lock, str(s.deadline))
		s.wantLong(t, s.k.Lock) // not set again for the copy's lease
		s.wantValue(t, s.k.Fence, "42")
	}
}

// TestStampResendAfterAnotherTookSameDeadline: a resend of an attempt whose first copy
// took the key is the attempt's only while nothing took the key since. Here the key was
// deleted by hand while the attempt waited for its reply, and another client took the free
// key with the very same deadline (deadlines are not unique): the resend finds its own
// deadline in the key, but the counter moved on, so it is refused as gone and writes
// nothing; the two never hold one fencing token.
func TestStampResendAfterAnotherTookSameDeadline(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	s := newServedRig(t, rdb, "stamp-resend-other")
	got, err := stampAcq(rdb, s.k, tokenA, s.clock, s.deadline, lateTTL) // A's first copy
	must(t, got, err, 1)
	if err := rdb.Del(ctx, s.k.Lock).Err(); err != nil { // by hand, while A waits
		t.Fatal(err)
	}
	got, err = stampAcq(rdb, s.k, tokenB, s.clock-5, s.deadline, lateTTL+5*time.Millisecond) // B: same deadline
	must(t, got, err, 2)
	before := s.snapshot(t)
	got, err = stampAcq(rdb, s.k, tokenA, s.clock, s.deadline, lateTTL) // A's resend
	if err != nil || !Gone(got) {
		t.Fatalf("A's resend after B took the same deadline = %d, %v; want the gone reply (B holds fencing token 2)", got, err)
	}
	s.unchanged(t, before, "A's resend")
}

// TestStampCopyAfterReleaseIsGone: once client A's hold is released, a copy of its
// attempt that lands is refused as gone and writes nothing, whether the key is free or
// another client holds it; and an Extend of A's hold to an hour, naming A's id and the
// deadline it owned, finds nothing of A's and returns 0.
func TestStampCopyAfterReleaseIsGone(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	s := newServedRig(t, rdb, "stamp-copy-gone")
	da := s.deadline

	got, err := stampAcq(rdb, s.k, tokenA, s.clock, da, lateTTL)
	must(t, got, err, 1)
	got, err = runStampRelease(rdb, s.k, "PUBLISH", da)
	must(t, got, err, 1)
	s.wantGone(t, s.k.Lock)

	landed := func(what string) {
		t.Helper()
		before := s.snapshot(t)
		got, err := stampAcq(rdb, s.k, tokenA, s.clock, da, lateTTL) // a copy of A's attempt
		if err != nil || !Gone(got) {
			t.Fatalf("%s: a copy of A's attempt = %d, %v; want the gone reply", what, got, err)
		}
		s.unchanged(t, before, what+": the copy")
		got, err = runStampExtend(rdb, s.k, da+3_600_000, time.Hour, tokenA, da) // A's Extend(1h)
		must(t, got, err, 0)
		s.unchanged(t, before, what+": the Extend")
	}
	landed("on the free key")
	s.wantGone(t, s.k.Lock)

	theirs := time.Now().UnixMilli() + otherLong.Milliseconds()
	got, err = stampAcq(rdb, s.k, tokenB, time.Now().UnixMilli(), theirs, otherLong) // client B
	must(t, got, err, 2)
	landed("on B's key")
	s.wantValue(t, s.k.Lock, strconv.FormatInt(theirs, 10))
	s.wantLong(t, s.k.Lock)
	s.wantServed(t, tokenA, lateTTL) // as A's release left it
}
