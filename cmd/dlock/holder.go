package main

import (
	"context"
	"fmt"
	"time"

	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/quorum"
)

// holderRemaining describes, for a "not acquired" message, how long the holder keeps the
// lock: the PTTL of the lock key, or on a quorum the time until a majority of the servers
// could be free (quorum.UntilFree; a key without expiry is never free); "" when that is
// not known. It also reports whether a majority of the servers answered: if not, the wait
// failed for want of Redis, not because of a holder.
func holderRemaining(d *deployment, keys keyspace.Keys) (string, bool) {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	var left []time.Duration
	free, noExpiry, failed := 0, 0, 0
	for _, n := range d.nodes {
		ms, err := n.rdb.Do(ctx, "PTTL", keys.Lock).Int64()
		switch {
		case err != nil:
			failed++
		case ms == -2:
			free++
		case ms == -1:
			noExpiry++
		default:
			left = append(left, time.Duration(ms)*time.Millisecond)
		}
	}
	answered := len(d.nodes)-failed >= d.majority()
	need := d.majority() - free
	until, known := quorum.UntilFree(need, left)
	switch {
	case need <= 0:
		return " (it was released just now: try again)", answered
	case known:
		return fmt.Sprintf(", whose lease has %v left", roundDuration(until)), answered
	case noExpiry > 0:
		return fmt.Sprintf(" and its key %s has no expiry: if its holder is gone, remove it with 'dlock unlock --force'", keys.Lock), answered
	}
	return "", answered
}

// roundDuration rounds d for display: to the millisecond below 10s, to 0.1s above.
func roundDuration(d time.Duration) time.Duration {
	if d < 10*time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}
