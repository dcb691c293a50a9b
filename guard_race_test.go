package dlock_test

import (
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
)

// TestGuardRacingUnlock: a Guard and an Unlock of one lease at once, 300 times. The Guard
// applies (having landed first) or is refused, the count of applied writes is the count
// of Guards that returned nil, and a refusal that lands after the release does not turn
// the lease's ErrReleased into ErrLost.
func TestGuardRacingUnlock(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, time.Minute)
	m := newClient(t, rdb).Mutex("guard-race")
	applied := 0
	for i := range 300 {
		lease := mustLock(t, m, ctx)
		var guardErr, unlockErr error
		var wg sync.WaitGroup
		wg.Go(func() { guardErr = guardIncr(ctx, lease, lease.Key("n")) })
		wg.Go(func() {
			time.Sleep(time.Duration(i%7) * 50 * time.Microsecond)
			unlockErr = lease.Unlock(ctx)
		})
		wg.Wait()
		if unlockErr != nil || !errors.Is(lease.Err(), dlock.ErrReleased) {
			t.Fatalf("round %d: Unlock %v, Err %v (Guard: %v)", i, unlockErr, lease.Err(), guardErr)
		}
		switch {
		case guardErr == nil:
			applied++
		case !errors.Is(guardErr, dlock.ErrNotHeld):
			t.Fatalf("round %d: Guard: %v", i, guardErr)
		}
	}
	if n, _ := rdb.Get(ctx, "{dlock:guard-race}/n").Int(); n != applied {
		t.Fatalf("n = %d, but %d Guards returned nil", n, applied)
	}
}
