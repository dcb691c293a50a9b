package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/seed51c676c8/dlock/internal/quorum"
)

// nodeTimeout is how long one node of c may take to answer one call of a lock whose lease
// is ttl long. On a quorum it is short (quorum.NodeTimeout), since a hung node must cost a
// fraction of the lease and the other nodes can decide without it; one deployment has no
// other node to turn to, so it gets longer (a third of the lease, at most a second), which
// a loaded server needs more than a quick verdict. Waits for replica acknowledgements
// (acks.go) come on top: two, since a call can queue on its lane behind a round trip whose
// WAIT is under way before its own round trip's WAIT.
func nodeTimeout(c *Client, ttl time.Duration) time.Duration {
	acks := 2 * c.cfg.Acks.Timeout
	if len(c.nodes) > 1 {
		return quorum.NodeTimeout(ttl) + acks
	}
	return min(max(ttl/3, 5*time.Millisecond), time.Second) + acks
}

// renewTimeout is how long a renewal waits for the nodes' replies: a hung node must not
// hold up the others' verdict for long.
func renewTimeout(c *Client, ttl time.Duration) time.Duration {
	return min(ttl/3, max(4*nodeTimeout(c, ttl), 50*time.Millisecond))
}

// gaveUpAfter is gaveUp with what the last attempt ran into, if it failed.
func gaveUpAfter(name string, ctx context.Context, left time.Duration, lastErr error) error {
	if lastErr == nil {
		return gaveUp(name, ctx, left)
	}
	return fmt.Errorf("%w; the last attempt: %w", gaveUp(name, ctx, left), Inner(lastErr))
}

// gaveUp is the error of a wait for the lock called name that ctx ended; it wraps
// ctx.Err(). left is the holder's time left, as the last refusal said (<0: unknown).
func gaveUp(name string, ctx context.Context, left time.Duration) error {
	if left >= 0 {
		return fmt.Errorf("dlock: lock %q: gave up waiting: %w (the holder's lease had %v left)", name, ctx.Err(), left)
	}
	return fmt.Errorf("dlock: lock %q: gave up waiting: %w", name, ctx.Err())
}

// turnLength is how long a released lock is kept for the process whose turn it is. That
// process was told by the release and normally asks within a round trip; the turn only
// lapses when it has died or stopped waiting without saying so. Each Client keeps its own
// (a turn), which tests change before they use it.
const turnLength = 20 * time.Millisecond

// A turn is a Client's turn length, and the same as a script argument (boxed once).
type turn struct {
	length time.Duration
	arg    any
}

func newTurn(d time.Duration) turn { return turn{length: d, arg: ms(d.Milliseconds())} }
