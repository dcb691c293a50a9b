package engine

import (
	"context"
	"testing"
	"time"
)

// TestRecheckBound: a waiter blind to a refusing node (tracking refused or failed) pauses
// no longer than a back-off that grows from minBackoff to maxRecheck, and never longer
// than it would have anyway; once every refusing node is armed it sleeps as it would,
// and the back-off starts again from minBackoff. A kind that does not track (nil) is
// left alone.
func TestRecheckBound(t *testing.T) {
	const long = 30 * time.Second
	tk := &tracking{backoff: minBackoff, blind: true}
	var pauses []time.Duration
	for range 10 {
		pauses = append(pauses, tk.bound(long))
	}
	for i, p := range pauses {
		ceiling := min(minBackoff<<i, maxRecheck)
		if p < ceiling/2 || p > ceiling {
			t.Fatalf("re-check %d paused %v, want in [%v, %v]; all: %v", i, p, ceiling/2, ceiling, pauses)
		}
	}
	if last := pauses[len(pauses)-1]; last < maxRecheck/2 {
		t.Fatalf("the back-off did not reach maxRecheck: %v", pauses)
	}
	if got := tk.bound(time.Millisecond); got > time.Millisecond {
		t.Fatalf("bound(1ms) = %v while blind: longer than the waiter's own pause", got)
	}

	tk.blind = false
	if got := tk.bound(long); got != long {
		t.Fatalf("bound(%v) = %v with every refusing node armed", long, got)
	}
	tk.blind = true
	if got := tk.bound(long); got > minBackoff {
		t.Fatalf("first re-check after being armed paused %v, want at most %v", got, minBackoff)
	}

	var none *tracking
	if got := none.bound(long); got != long || none.arm(context.Background(), nil, []int{0}) {
		t.Fatal("a nil tracking changed the pause or armed")
	}
	none.close()
}
