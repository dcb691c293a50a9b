//go:build !linux

package redistest

import (
	"testing"
	"time"
)

// Clock steps the wall clock of one redis-server; only on Linux (see faketime.go).
type Clock struct{}

// StartFaketime fails the test: preloading libfaketime into one server is done on Linux only.
func StartFaketime(tb testing.TB, opts ...Option) (*Server, *Clock) {
	tb.Helper()
	tb.Fatalf("redistest: StartFaketime needs Linux (libfaketime preloaded into redis-server)")
	return nil, nil
}

// Offset returns how far the server's wall clock has been stepped.
func (c *Clock) Offset() time.Duration { return 0 }

// Step moves the server's wall clock by d.
func (c *Clock) Step(tb testing.TB, d time.Duration) {}
