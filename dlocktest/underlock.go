package dlocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
)

// probeTimeout bounds each of RanUnderLock's attempts.
const probeTimeout = 10 * time.Second

// Locker is a lock that RanUnderLock can check: a *dlock.Mutex or *dlock.FairMutex, or a
// *dlock.RWMutex, whose TryLock fails while it is held in either mode.
type Locker interface {
	TryLock(ctx context.Context) (*dlock.Lease, error)
}

// RanUnderLock runs fn and checks that l was held, by anyone, both when fn started and
// when it returned. Call it where the code under test does the work that its lock
// protects, from a hook or a fake of your own. Each check is one TryLock of l, which must
// fail with dlock.ErrNotAcquired; if it succeeds instead, the lock was free, and the lease
// it got is unlocked at once. A failed check is reported with t.Errorf, which is safe from
// any goroutine; fn runs whatever the first check found.
//
// The checks see that someone held l, not who: use a name that only the code under test
// locks.
func RanUnderLock(t testing.TB, l Locker, fn func()) {
	t.Helper()
	if l == nil {
		t.Errorf("dlocktest: RanUnderLock was given a nil lock")
		fn()
		return
	}
	check(t, l, "when the work started")
	fn()
	check(t, l, "when the work ended")
}

// check reports, with t.Errorf, that l was not held at the moment described by when.
func check(t testing.TB, l Locker, when string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	lease, err := l.TryLock(ctx)
	switch {
	case errors.Is(err, dlock.ErrNotAcquired):
	case err != nil:
		t.Errorf("dlocktest: RanUnderLock cannot tell whether the lock is held %s: %v", when, err)
	default:
		_ = lease.Unlock(ctx)
		t.Errorf("dlocktest: the lock %q was free %s: the work ran without it", lease.Name(), when)
	}
}
