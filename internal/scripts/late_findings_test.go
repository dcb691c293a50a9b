//go:build latefindings

package scripts

import (
	"testing"
	"time"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// Late landings that still harm. Each test asserts the rule ("a call that lands late can
// never harm") and so FAILS while the harm is there: run them with
//
//	go test -tags latefindings -run TestLateFinding ./internal/scripts/

// TestLateFindingStampReleaseSameMillisecond: a TimestampMutex release that lands after a
// later hold wrote the very same deadline (acquired within the millisecond of the
// release, with the same lease length) deletes that live hold's key.
func TestLateFindingStampReleaseSameMillisecond(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "finding:stamp")
	now := time.Now().UnixMilli()
	deadline := now + 30_000
	// The release of hold 1 (deadline written at now) is sent; hold 2 acquires in the same
	// millisecond, and its acquire lands first.
	got, err := stampAcq(rdb, k, now, deadline, 30*time.Second)
	must(t, got, err, 1)
	got, err = stampRel(rdb, k, "PUBLISH", deadline) // hold 1's release, landing late
	must(t, got, err, 0)
}
