// Package embedredis runs an in-process Redis, miniredis, on a loopback port: what
// `dlock demo` and `dlock bench`, the examples and dlocktest.Embedded run on when no
// redis-server is at hand.
//
// Keys expire in step with the wall clock. miniredis expires keys only when told that time
// has passed (FastForward); with its ClockTTL mode each command first advances the TTLs by
// the time elapsed since the previous one, so a key is gone as soon as anyone can look.
// That costs a pass over the keys with a TTL per command: fine for tests and demos, not a
// server for many keys.
package embedredis

import (
	"fmt"

	"github.com/alicebob/miniredis/v2"
)

// Start starts a miniredis on a free port of 127.0.0.1 whose keys expire in step with the
// wall clock. Close it when done.
func Start() (*miniredis.Miniredis, error) {
	mr := miniredis.NewMiniRedis()
	mr.ClockTTL(true)
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("cannot start the embedded Redis (miniredis): %w", err)
	}
	return mr, nil
}
