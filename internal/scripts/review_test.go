package scripts

import (
	"testing"
	"time"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// Adversarial review: script-level replays of the engine findings in review_test.go.

// A late attempt of a standing request that is still standing must not lower the lease a
// grant of it sets: another handle of the process, with a longer TTL, may be the one that
// takes the grant (takeGrant believes min(its TTL, grantLength)).
func TestLateRefreshNeverLowersGrantLength(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	r := &lateRig{rdb: rdb, k: keys(t, "review:grant-length")}
	r.ps = confirmed(t, rdb.Subscribe(ctx, r.k.Channel))
	r.setLong(t, r.k.Lock, tokenB)
	ask := func(ttl time.Duration) (int64, error) {
		return MutexAcquire.Run(ctx, rdb, []string{r.k.Lock, r.k.Fence, r.k.Turns, r.k.Asks},
			tokenA, ttl.Milliseconds(), 1, "p1", "1", 60000, 3000, "1").Int64()
	}
	// The long handle's refresh, then the short handle's, sent before it, landing late.
	if got, err := ask(time.Minute); err != nil || got > 0 {
		t.Fatalf("long refresh: %d, %v", got, err)
	}
	if got, err := ask(100 * time.Millisecond); err != nil || got > 0 {
		t.Fatalf("late short refresh: %d, %v", got, err)
	}
	got, err := r.mutexRelease(tokenB) // grants p1's request
	must(t, got, err, 1)
	r.heard(t, "grant:p1:"+tokenA+":1:1")
	if pttl := rdb.PTTL(ctx, r.k.Lock).Val(); pttl < grantLength-time.Second {
		t.Errorf("the grant set the key for %v; the waiting handle believes min(1m, %v)", pttl, grantLength)
	}
}

// A released token's acquisition that lands late takes the free lock for its TTL at most:
// an extension of the same token that lands after it must not lengthen that.
func TestLateAcquireThenExtendStaysWithinTTL(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	r := &lateRig{rdb: rdb, k: keys(t, "review:resurrect")}
	const ttl = 2 * time.Second
	acquire := func() (int64, error) {
		return MutexAcquire.Run(ctx, rdb, []string{r.k.Lock, r.k.Fence, r.k.Turns, r.k.Asks},
			tokenA, ttl.Milliseconds(), 1, "p1", "0", 60000, 3000, "").Int64()
	}
	got, err := acquire() // the resend that acquired
	must(t, got, err, 1)
	got, err = MutexExtend.Run(ctx, rdb, []string{r.k.Lock}, tokenA, time.Hour.Milliseconds()).Int64() // its Extend's resend
	must(t, got, err, 1)
	got, err = r.mutexRelease(tokenA) // Unlock
	must(t, got, err, 1)
	got, err = acquire() // the first copy of the acquisition, landing late
	if err != nil || got <= 0 {
		t.Skipf("the late copy did not take the free lock: %d, %v", got, err)
	}
	got, err = MutexExtend.Run(ctx, rdb, []string{r.k.Lock}, tokenA, time.Hour.Milliseconds()).Int64() // the Extend's first copy
	if err != nil {
		t.Fatal(err)
	}
	if pttl := rdb.PTTL(ctx, r.k.Lock).Val(); pttl > ttl {
		t.Errorf("the late copies keep a lock no one holds for %v (late Extend reply %d); the late acquisition's TTL is %v", pttl, got, ttl)
	}
}
