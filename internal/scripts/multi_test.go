package scripts

import (
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// multiAcquireKeys are multi_acquire's KEYS for the names ks, in order: each name's lock
// and fencing counter, then the first name's tombstones.
func multiAcquireKeys(ks []keyspace.Keys) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.Lock, k.Fence)
	}
	return append(out, ks[0].Gone)
}

// multiReleaseKeys are multi_release's KEYS: each name's mutex_release keys.
func multiReleaseKeys(ks []keyspace.Keys) []string {
	var out []string
	for _, k := range ks {
		out = append(out, mutexReleaseKeys(k)...)
	}
	return out
}

// multiExtendKeys are multi_extend's KEYS: each name's lock key, then the first name's
// tombstones.
func multiExtendKeys(ks []keyspace.Keys) []string {
	var out []string
	for _, k := range ks {
		out = append(out, k.Lock)
	}
	return append(out, ks[0].Gone)
}

func runMultiAcquire(rdb redis.Scripter, ks []keyspace.Keys, token string, ttl time.Duration) (int64, error) {
	return runMultiAcquireAbove(rdb, ks, token, ttl, 0)
}

func runMultiAcquireAbove(rdb redis.Scripter, ks []keyspace.Keys, token string, ttl time.Duration, floor int64) (int64, error) {
	return MultiAcquire.Run(ctx, rdb, multiAcquireKeys(ks), token, ttl.Milliseconds(), floor).Int64()
}

// runMultiRelease releases with turns of turn ("" for none), publishing with publish.
func runMultiRelease(rdb redis.Scripter, ks []keyspace.Keys, token, publish, turn string) (int64, error) {
	args := []any{token, publish, turn, 3000}
	for _, k := range ks {
		args = append(args, k.Channel)
	}
	return MultiRelease.Run(ctx, rdb, multiReleaseKeys(ks), args...).Int64()
}

func runMultiExtend(rdb redis.Scripter, ks []keyspace.Keys, token string, ttl time.Duration) (int64, error) {
	return MultiExtend.Run(ctx, rdb, multiExtendKeys(ks), token, ttl.Milliseconds()).Int64()
}

func manyKeys(t *testing.T, names ...string) []keyspace.Keys {
	ks := make([]keyspace.Keys, len(names))
	for i, n := range names {
		ks[i] = keys(t, n)
	}
	return ks
}

// TestMultiAcquire: all names or none; the fencing token is one above the largest counter
// of the names and lands in every counter; a refusal tells the longest time left and the
// first holder, and changes nothing.
func TestMultiAcquire(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ks := manyKeys(t, "m:a", "m:b", "m:c")
	counters := func() string {
		return rdb.Get(ctx, ks[0].Fence).Val() + " " + rdb.Get(ctx, ks[1].Fence).Val() + " " + rdb.Get(ctx, ks[2].Fence).Val()
	}

	rdb.Set(ctx, ks[1].Fence, 7, 0) // m:b was locked 7 times before
	got, err := runMultiAcquire(rdb, ks, tokenA, time.Minute)
	must(t, got, err, 8)
	if c := counters(); c != "8 8 8" {
		t.Fatalf("counters = %s, want 8 8 8", c)
	}
	wantTombstoneFor(t, rdb, ks[0].Gone, tokenA, time.Minute) // the first name keeps the hold's tombstone
	wantNoTombstones(t, rdb, ks[1].Gone)                      // nor the other names
	wantNoTombstones(t, rdb, ks[2].Gone)
	for _, k := range ks {
		if v := rdb.Get(ctx, k.Lock).Val(); v != tokenA {
			t.Fatalf("%s holds %q, want the token", k.Lock, v)
		}
		if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl <= 0 || pttl > time.Minute {
			t.Fatalf("%s PTTL = %v", k.Lock, pttl)
		}
	}
	// The same call again (its reply lost) finds its own token in every name: it replies
	// the names' fencing token and changes nothing.
	rdb.PExpire(ctx, ks[0].Lock, time.Second)
	got, err = runMultiAcquire(rdb, ks, tokenA, time.Minute)
	must(t, got, err, 8)
	if c := counters(); c != "8 8 8" {
		t.Fatalf("counters = %s after the same call again, want 8 8 8", c)
	}
	if pttl := rdb.PTTL(ctx, ks[0].Lock).Val(); pttl <= 0 || pttl > time.Second {
		t.Fatalf("%s PTTL = %v after the same call again, want at most the 1s it had", ks[0].Lock, pttl)
	}
	// A floor below the counters changes nothing; one above them is the token. (Each
	// attempt has a fresh token.)
	const tokenD, tokenE = "dddddddddddddddddddddddddddddddd", "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee"
	must(t, 3, rdb.Del(ctx, ks[0].Lock, ks[1].Lock, ks[2].Lock).Err(), 3)
	got, err = runMultiAcquireAbove(rdb, ks[:1], tokenD, time.Minute, 3)
	must(t, got, err, 9)
	must(t, 1, rdb.Del(ctx, ks[0].Lock).Err(), 1)
	got, err = runMultiAcquireAbove(rdb, ks[:1], tokenE, time.Minute, 20)
	must(t, got, err, 20)
	rdb.MSet(ctx, ks[0].Fence, 9, ks[1].Fence, 9, ks[2].Fence, 9)

	// A Mutex takes one of the names where a MultiMutex has it not: it counts on from 9.
	must(t, 1, rdb.Del(ctx, ks[0].Lock).Err(), 1)
	got, err = acquire(rdb, ks[2], tokenB, 10*time.Second)
	must(t, got, err, 10)
	rdb.Set(ctx, ks[1].Lock, "other", 20*time.Second)

	got, err = runMultiAcquire(rdb, ks, tokenA, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, got, 20*time.Second, "other") // the first name held is m:b; the longest time m:b's
	if left, _ := Refusal(got); left <= 10*time.Second {
		t.Fatalf("refusal says %v left, want the longest of the holders (20s)", left)
	}
	if rdb.Exists(ctx, ks[0].Lock).Val() != 0 || counters() != "9 9 10" {
		t.Fatalf("a refused acquisition changed something: m:a exists %d, counters %s", rdb.Exists(ctx, ks[0].Lock).Val(), counters())
	}

	// A holder without expiry makes the time left unknown.
	rdb.Persist(ctx, ks[2].Lock)
	got, err = runMultiAcquire(rdb, ks, tokenA, time.Minute)
	if left, _ := Refusal(got); err != nil || got > 0 || left != 0 {
		t.Fatalf("refusal with a key without expiry = %d (%v left), %v; want 0 left", got, left, err)
	}
	// A promise of a turn to a Mutex process holds the name too.
	rdb.Del(ctx, ks[1].Lock, ks[2].Lock)
	rdb.Set(ctx, ks[2].Lock, "turn:p1", 20*time.Millisecond)
	got, err = runMultiAcquire(rdb, ks, tokenA, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	wantRefusal(t, got, 20*time.Millisecond, "turn:p1")

	// Every name free again: tokenA, served above, takes none of them.
	rdb.Del(ctx, ks[2].Lock)
	got, err = runMultiAcquire(rdb, ks, tokenA, time.Minute)
	if err != nil || !Gone(got) {
		t.Fatalf("acquisition of a served token = %d, %v; want the gone reply", got, err)
	}
	if n := rdb.Exists(ctx, ks[0].Lock, ks[1].Lock, ks[2].Lock).Val(); n != 0 || counters() != "9 9 10" {
		t.Fatalf("a gone acquisition changed something: %d lock keys, counters %s", n, counters())
	}
}

// TestMultiAcquireOfItsOwnHoldChangesNothing: a multi_acquire whose token every name
// holds already (its reply lost, or a copy landing while its hold lives) replies the
// names' fencing token, the largest of their counters (at least 1), and writes nothing: no
// name is set again, so copies of one call do not add up.
func TestMultiAcquireOfItsOwnHoldChangesNothing(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	s := newServedRig(t, rdb, "multi-own")
	a, b := s.ks[0], s.ks[1]
	rdb.Set(ctx, b.Fence, 6, 0)
	got, err := runMultiAcquire(rdb, s.ks, tokenA, time.Minute)
	must(t, got, err, 7)
	for _, k := range s.ks {
		rdb.PExpire(ctx, k.Lock, 5*time.Second) // shorter than its TTL: a SET would show
	}
	rdb.Set(ctx, a.Fence, 9, 0) // one counter raised meanwhile: the largest is replied

	before := s.snapshot(t)
	got, err = runMultiAcquire(rdb, s.ks, tokenA, time.Minute)
	must(t, got, err, 9)
	s.unchanged(t, before, "the same call again")

	rdb.Del(ctx, a.Fence, b.Fence) // the counters deleted out of band
	before = s.snapshot(t)
	got, err = runMultiAcquire(rdb, s.ks, tokenA, time.Minute)
	must(t, got, err, 1)
	s.unchanged(t, before, "the same call again, with no counters")
}

func TestMultiAcquireBadData(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ks := manyKeys(t, "bad:a", "bad:b")

	rdb.Set(ctx, ks[1].Fence, "twelve", 0)
	_, err := runMultiAcquire(rdb, ks, tokenA, time.Minute)
	if err == nil || !redis.HasErrorPrefix(err, "value is not an integer") {
		t.Fatalf("error = %v, want the INCR error naming the counter", err)
	}
	if n := rdb.Exists(ctx, ks[0].Lock, ks[1].Lock).Val(); n != 0 || rdb.Exists(ctx, ks[0].Fence).Val() != 0 {
		t.Fatalf("a failed acquisition left %d lock keys, or a counter", n)
	}
	rdb.Del(ctx, ks[1].Fence)
	rdb.RPush(ctx, ks[1].Lock, "x")
	_, err = runMultiAcquire(rdb, ks, tokenA, time.Minute)
	wantWrongType(t, err)
}

// TestMultiRelease: each name that holds the token is passed on as a Mutex release would:
// granted to a waiting Mutex process, or "released" published; a name no longer held makes
// the reply 0 and the others are released all the same.
func TestMultiRelease(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ks := manyKeys(t, "r:a", "r:b")
	sub := rdb.Subscribe(ctx, ks[0].Channel, ks[1].Channel)
	defer sub.Close()
	for range 2 {
		if _, err := sub.ReceiveTimeout(ctx, 5*time.Second); err != nil { // the confirmations
			t.Fatal(err)
		}
	}
	message := func(channel, want string) {
		t.Helper()
		msg, err := sub.ReceiveTimeout(ctx, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if m, ok := msg.(*redis.Message); !ok || m.Channel != channel || m.Payload != want {
			t.Fatalf("published %v, want %q on %s", msg, want, channel)
		}
	}

	got, err := runMultiAcquire(rdb, ks, tokenA, time.Minute)
	must(t, got, err, 1)
	// A Mutex process p2 waits for r:b with a standing request.
	if got, err := acquireAs(rdb, ks[1], tokenB, time.Minute, turnArgs{reserve: 1, me: "p2"}); err != nil || got > 0 {
		t.Fatalf("Mutex acquire of a name the MultiMutex holds = %d, %v; want a refusal", got, err)
	}
	got, err = runMultiRelease(rdb, ks, tokenB, "PUBLISH", "20") // not the holder
	must(t, got, err, 0)
	if rdb.Get(ctx, ks[0].Lock).Val() != tokenA {
		t.Fatal("a release with another token changed the keys")
	}
	got, err = runMultiRelease(rdb, ks, tokenA, "PUBLISH", "20")
	must(t, got, err, 1)
	message(ks[0].Channel, "released")
	message(ks[1].Channel, "grant:p2:"+tokenB+":2:1")
	if rdb.Exists(ctx, ks[0].Lock).Val() != 0 || rdb.Get(ctx, ks[1].Lock).Val() != tokenB {
		t.Fatal("r:a should be free and r:b granted to p2")
	}
	wantTombstoneFor(t, rdb, ks[1].Gone, tokenB, 3*time.Second) // the grant served p2's token, as a Mutex release does, for the grant length
	rdb.Del(ctx, ks[1].Lock)

	// One name lost (deleted): 0, and the other is released. Each hold has a fresh token.
	const tokenD = "dddddddddddddddddddddddddddddddd"
	got, err = runMultiAcquire(rdb, ks, tokenC, time.Minute)
	must(t, got, err, 3)
	rdb.Del(ctx, ks[1].Lock)
	got, err = runMultiRelease(rdb, ks, tokenC, "PUBLISH", "")
	must(t, got, err, 0)
	message(ks[0].Channel, "released")
	if rdb.Exists(ctx, ks[0].Lock).Val() != 0 {
		t.Fatal("the name still held was not released")
	}

	// An empty publish command deletes without waking anyone.
	got, err = runMultiAcquire(rdb, ks, tokenD, time.Minute)
	must(t, got, err, 4)
	got, err = runMultiRelease(rdb, ks, tokenD, "", "")
	must(t, got, err, 1)
	rdb.Publish(ctx, ks[0].Channel, "marker")
	message(ks[0].Channel, "marker")
	if n := rdb.Exists(ctx, ks[0].Lock, ks[1].Lock).Val(); n != 0 {
		t.Fatalf("%d lock keys left after a silent release", n)
	}
}

// TestMultiExtend: all names or none.
func TestMultiExtend(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ks := manyKeys(t, "e:a", "e:b")

	got, err := runMultiAcquire(rdb, ks, tokenA, 10*time.Second)
	must(t, got, err, 1)
	got, err = runMultiExtend(rdb, ks, tokenA, time.Minute)
	must(t, got, err, 1)
	for _, k := range ks {
		if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl <= 10*time.Second {
			t.Fatalf("%s PTTL = %v after extending to a minute", k.Lock, pttl)
		}
	}
	got, err = runMultiExtend(rdb, ks, tokenA, time.Second) // only lengthens
	must(t, got, err, 1)
	for _, k := range ks {
		if pttl := rdb.PTTL(ctx, k.Lock).Val(); pttl <= 10*time.Second {
			t.Fatalf("%s PTTL = %v: a shorter renewal shortened the key", k.Lock, pttl)
		}
	}

	rdb.Set(ctx, ks[1].Lock, tokenB, 5*time.Second) // taken
	before := rdb.PTTL(ctx, ks[0].Lock).Val()
	got, err = runMultiExtend(rdb, ks, tokenA, time.Minute)
	must(t, got, err, 0)
	if after := rdb.PTTL(ctx, ks[0].Lock).Val(); after > before {
		t.Fatalf("a renewal that found one name taken extended another (%v -> %v)", before, after)
	}
}

// TestFenceRaiseMany: every counter given reaches the value; the reply is the smallest.
func TestFenceRaiseMany(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	ks := manyKeys(t, "f:a", "f:b", "f:c")
	rdb.Set(ctx, ks[1].Fence, 9, 0)
	rdb.Set(ctx, ks[2].Fence, 3, 0)
	got, err := FenceRaise.Run(ctx, rdb, []string{ks[0].Fence, ks[1].Fence, ks[2].Fence}, 5).Int64()
	must(t, got, err, 5)
	for i, want := range []int64{5, 9, 5} {
		if v, _ := rdb.Get(ctx, ks[i].Fence).Int64(); v != want {
			t.Fatalf("counter %d = %d, want %d", i, v, want)
		}
	}
	got, err = FenceRaise.Run(ctx, rdb, []string{ks[1].Fence}, strconv.Itoa(4)).Int64()
	must(t, got, err, 9)
}

// TestMultiCluster: the keys of names that share a slot (one hash tag) go in one call on a
// Cluster, and the release is published with SPUBLISH on each name's channel.
func TestMultiCluster(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartCluster(t, 3).Client(t)
	ks := manyKeys(t, "{acct}:1", "{acct}:2")
	sub := rdb.SSubscribe(ctx, ks[1].Channel)
	defer sub.Close()
	if _, err := sub.ReceiveTimeout(ctx, 5*time.Second); err != nil {
		t.Fatal(err)
	}
	got, err := runMultiAcquire(rdb, ks, tokenA, time.Minute)
	must(t, got, err, 1)
	got, err = runMultiExtend(rdb, ks, tokenA, time.Minute)
	must(t, got, err, 1)
	got, err = runMultiRelease(rdb, ks, tokenA, "SPUBLISH", "20")
	must(t, got, err, 1)
	msg, err := sub.ReceiveTimeout(ctx, 5*time.Second)
	if m, ok := msg.(*redis.Message); err != nil || !ok || m.Payload != "released" {
		t.Fatalf("received %v, %v; want released", msg, err)
	}
}
