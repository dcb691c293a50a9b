package dlocktest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
)

// WaitLost waits up to within for lease to end and returns nil if it was lost (its Err is
// dlock.ErrLost). Otherwise it returns an error that says what happened instead: the lease
// was still held when within had passed, or it was released. It may be called from any
// goroutine.
func WaitLost(lease *dlock.Lease, within time.Duration) error {
	if lease == nil {
		return errors.New("dlocktest: WaitLost was given a nil lease")
	}
	timer := time.NewTimer(within)
	defer timer.Stop()
	select {
	case <-lease.Done():
	case <-timer.C:
	}
	switch err := lease.Err(); {
	case err == nil:
		return fmt.Errorf("dlocktest: lease of %q (token %d) still held after %v; it is valid for %v more",
			lease.Name(), lease.Token(), within, time.Until(lease.ValidUntil()).Round(time.Millisecond))
	case !errors.Is(err, dlock.ErrLost):
		return fmt.Errorf("dlocktest: lease of %q (token %d) ended with %v, not lost", lease.Name(), lease.Token(), err)
	}
	return nil
}

// AssertLost fails the test, and stops it (t.Fatal), unless lease is lost within within,
// as WaitLost judges. Like t.Fatal, it must be called from the goroutine running the test.
func AssertLost(t testing.TB, lease *dlock.Lease, within time.Duration) {
	t.Helper()
	if err := WaitLost(lease, within); err != nil {
		t.Fatal(err)
	}
}
