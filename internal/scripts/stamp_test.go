package scripts

import (
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// runStampAcquire runs stamp_acquire as a client whose clock reads now, for a lease of ttl.
func runStampAcquire(rdb redis.Scripter, lock, fence string, now time.Time, ttl time.Duration) (int64, error) {
	return StampAcquire.Run(ctx, rdb, []string{lock, fence},
		now.UnixMilli(), now.Add(ttl).UnixMilli(), ttl.Milliseconds()).Int64()
}

func runStampExtend(rdb redis.Scripter, lock string, deadline int64, ttl time.Duration, owned ...int64) (int64, error) {
	args := []any{deadline, ttl.Milliseconds()}
	for _, o := range owned {
		args = append(args, o)
	}
	return StampExtend.Run(ctx, rdb, []string{lock}, args...).Int64()
}

func runStampRelease(rdb redis.Scripter, lock, channel, publish string, owned ...int64) (int64, error) {
	args := []any{channel, publish}
	for _, o := range owned {
		args = append(args, o)
	}
	return StampRelease.Run(ctx, rdb, []string{lock}, args...).Int64()
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

// stampAcquireFree: free key takes the deadline, an expiry and a fence.
func stampAcquireFree(t *testing.T, rdb *redis.Client, now time.Time) {
	for want := int64(1); want <= 2; want++ {
		got, err := runStampAcquire(rdb, "free", "free:fence", now, time.Minute)
		must(t, got, err, want)
		if v := getInt(t, rdb, "free"); v != now.Add(time.Minute).UnixMilli() {
			t.Fatalf("key holds %d, want the deadline %d", v, now.Add(time.Minute).UnixMilli())
		}
		if pttl := rdb.PTTL(ctx, "free").Val(); pttl <= 59*time.Second || pttl > time.Minute {
			t.Fatalf("PTTL = %v, want about the lease length", pttl)
		}
		rdb.Del(ctx, "free")
	}
}

// stampAcquireHeld: held key refuses with the time to its deadline by the caller's clock.
func stampAcquireHeld(t *testing.T, rdb *redis.Client, now time.Time) {
	rdb.Set(ctx, "held", now.Add(10*time.Second).UnixMilli(), 0) // a legacy holder: no expiry
	got, err := runStampAcquire(rdb, "held", "held:fence", now, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if left, _ := Refusal(got); got > 0 || left < 10*time.Second || left > 10*time.Second+time.Millisecond {
		t.Fatalf("reply %d (%v left), want a refusal with 10s left", got, left)
	}
	rdb.PExpire(ctx, "held", 2*time.Second) // an expiry sooner than the deadline
	got, _ = runStampAcquire(rdb, "held", "held:fence", now, time.Minute)
	wantRefusal(t, got, 2*time.Second, rdb.Get(ctx, "held").Val())
	if rdb.Exists(ctx, "held:fence").Val() != 0 {
		t.Fatal("a refused acquire raised the fence")
	}
}

// stampAcquirePassed: passed deadline is taken over.
func stampAcquirePassed(t *testing.T, rdb *redis.Client, now time.Time) {
	rdb.Set(ctx, "passed", now.Add(-time.Millisecond).UnixMilli(), 0)
	got, err := runStampAcquire(rdb, "passed", "passed:fence", now, time.Minute)
	must(t, got, err, 1)
	if v := getInt(t, rdb, "passed"); v != now.Add(time.Minute).UnixMilli() {
		t.Fatalf("key holds %d after a takeover, want the new deadline", v)
	}
	if pttl := rdb.PTTL(ctx, "passed").Val(); pttl <= 0 {
		t.Fatalf("PTTL = %v after a takeover, want the lease length", pttl)
	}
	rdb.Set(ctx, "passed", now.UnixMilli(), 0) // the deadline is now: not passed yet
	got, _ = runStampAcquire(rdb, "passed", "passed:fence", now, time.Minute)
	if got > 0 {
		t.Fatal("a deadline equal to the caller's clock was taken over")
	}
}

// stampAcquireBrokenFence: broken fence undoes the take.
func stampAcquireBrokenFence(t *testing.T, rdb *redis.Client, now time.Time) {
	rdb.Set(ctx, "undo:fence", "not a number", 0)
	if _, err := runStampAcquire(rdb, "undo", "undo:fence", now, time.Minute); err == nil {
		t.Fatal("no error with a broken fence")
	}
	if rdb.Exists(ctx, "undo").Val() != 0 {
		t.Fatal("a free key was left taken")
	}
	old := now.Add(-time.Second).UnixMilli()
	rdb.Set(ctx, "undo", old, 30*time.Second)
	if _, err := runStampAcquire(rdb, "undo", "undo:fence", now, time.Minute); err == nil {
		t.Fatal("no error with a broken fence")
	}
	if v, pttl := getInt(t, rdb, "undo"), rdb.PTTL(ctx, "undo").Val(); v != old || pttl <= 0 || pttl > 30*time.Second {
		t.Fatalf("key holds %d with PTTL %v after an undone takeover, want %d with its expiry", v, pttl, old)
	}
}

// stampAcquireNotDeadline: a value that is not a deadline is an error and is left alone.
func stampAcquireNotDeadline(t *testing.T, rdb *redis.Client, now time.Time) {
	for value, why := range map[string]string{
		"hello": `"hello", which is not a unix-ms deadline`, "": `""`,
		"1700000000": "looks like unix seconds", "-1700000000000": `"-1700000000000"`,
		"1700000000000.0": `"1700000000000.0"`, "1234567890123456": `"1234567890123456"`,
		" 1700000000000": `" 1700000000000"`, "\x00\n": `"??"`,
	} {
		rdb.Set(ctx, "bad", value, 0)
		_, err := runStampAcquire(rdb, "bad", "bad:fence", now, time.Minute)
		if !redis.HasErrorPrefix(err, "NOTSTAMP") || !strings.Contains(err.Error(), why) {
			t.Errorf("value %q: %v, want NOTSTAMP saying %q", value, err, why)
		}
		if v := rdb.Get(ctx, "bad").Val(); v != value {
			t.Errorf("value %q changed to %q", value, v)
		}
	}
	rdb.Del(ctx, "bad")
	rdb.RPush(ctx, "bad", "x")
	_, err := runStampAcquire(rdb, "bad", "bad:fence", now, time.Minute)
	wantWrongType(t, err)
}

func TestStampExtend(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	now := time.Now()
	d0, d1, d2 := now.Add(10*time.Second).UnixMilli(), now.Add(20*time.Second).UnixMilli(), now.Add(30*time.Second).UnixMilli()

	got, err := runStampExtend(rdb, "ext", d1, time.Minute, d0)
	must(t, got, err, 0) // no key
	if rdb.Exists(ctx, "ext").Val() != 0 {
		t.Fatal("extend created the key")
	}
	rdb.Set(ctx, "ext", d0, 10*time.Second)
	got, err = runStampExtend(rdb, "ext", d1, time.Minute, d2) // not among ours
	must(t, got, err, 0)
	if v := getInt(t, rdb, "ext"); v != d0 {
		t.Fatalf("a refused extend changed the deadline to %d", v)
	}

	got, err = runStampExtend(rdb, "ext", d2, 30*time.Second, d1, d0) // any of ours counts
	must(t, got, err, 1)
	if v, pttl := getInt(t, rdb, "ext"), rdb.PTTL(ctx, "ext").Val(); v != d2 || pttl <= 29*time.Second {
		t.Fatalf("after extend: %d, PTTL %v; want %d, about 30s", v, pttl, d2)
	}
	// An older renewal landing late keeps the later deadline and expiry.
	got, err = runStampExtend(rdb, "ext", d1, 20*time.Second, d0, d2)
	must(t, got, err, 1)
	if v, pttl := getInt(t, rdb, "ext"), rdb.PTTL(ctx, "ext").Val(); v != d2 || pttl <= 29*time.Second {
		t.Fatalf("after a late, shorter renewal: %d, PTTL %v; want %d kept, about 30s", v, pttl, d2)
	}
	// An Extend to a shorter TTL keeps them too: shortening is the client's alone.
	got, err = runStampExtend(rdb, "ext", d0, 10*time.Second, d2)
	must(t, got, err, 1)
	if v, pttl := getInt(t, rdb, "ext"), rdb.PTTL(ctx, "ext").Val(); v != d2 || pttl <= 29*time.Second {
		t.Fatalf("after a shorter Extend: %d, PTTL %v; want %d kept, about 30s", v, pttl, d2)
	}
	// A key someone made persistent stays so while its deadline moves.
	d3 := now.Add(40 * time.Second).UnixMilli()
	rdb.Persist(ctx, "ext")
	got, err = runStampExtend(rdb, "ext", d3, 10*time.Second, d2)
	must(t, got, err, 1)
	if v, pttl := getInt(t, rdb, "ext"), rdb.PTTL(ctx, "ext").Val(); v != d3 || pttl != -1*time.Nanosecond {
		t.Fatalf("persistent key: %d, PTTL %v; want %d, no expiry", v, pttl, d3)
	}

	rdb.Del(ctx, "ext")
	rdb.RPush(ctx, "ext", "x")
	_, err = runStampExtend(rdb, "ext", d1, time.Minute, d0)
	wantWrongType(t, err)
}

func TestStampRelease(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	d0, d1 := time.Now().Add(time.Minute).UnixMilli(), time.Now().Add(2*time.Minute).UnixMilli()
	sub := rdb.Subscribe(ctx, "rel:released")
	defer sub.Close()
	if _, err := sub.Receive(ctx); err != nil {
		t.Fatal(err)
	}

	rdb.Set(ctx, "rel", d1, 0)
	got, err := runStampRelease(rdb, "rel", "rel:released", "PUBLISH", d0)
	must(t, got, err, 0)
	if v := getInt(t, rdb, "rel"); v != d1 {
		t.Fatalf("a release of another's deadline changed the key to %d", v)
	}
	got, err = runStampRelease(rdb, "rel", "rel:released", "", d0, d1) // quiet: wakes no one
	must(t, got, err, 1)
	rdb.Set(ctx, "rel", d0, 0)
	got, err = runStampRelease(rdb, "rel", "rel:released", "PUBLISH", d0)
	must(t, got, err, 1)
	if rdb.Exists(ctx, "rel").Val() != 0 {
		t.Fatal("release left the key")
	}
	msg, err := sub.ReceiveMessage(ctx)
	if err != nil || msg.Payload != "released" {
		t.Fatalf("message %v, %v; want one \"released\" (the quiet release publishes nothing)", msg, err)
	}

	rdb.RPush(ctx, "rel", "x")
	_, err = runStampRelease(rdb, "rel", "rel:released", "PUBLISH", d0)
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
	f.Fuzz(func(t *testing.T, value string) {
		rdb.Set(ctx, "fuzz", value, 0)
		defer rdb.Del(ctx, "fuzz", "fuzz:fence")
		got, err := runStampAcquire(rdb, "fuzz", "fuzz:fence", now, time.Minute)
		d, perr := strconv.ParseInt(value, 10, 64)
		isDeadline := deadlineForm.MatchString(value) && perr == nil && d >= 1e11
		switch {
		case !isDeadline:
			if !redis.HasErrorPrefix(err, "NOTSTAMP") {
				t.Fatalf("value %q: reply %d, %v; want NOTSTAMP", value, got, err)
			}
			if v := rdb.Get(ctx, "fuzz").Val(); v != value {
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
