package batch

import (
	"testing"
	"time"
)

// TestBeforeSharesTheRoundTrip: a call's Before goes out just ahead of it, in the same
// round trip, and is answered on its own Done; the call is answered as usual.
func TestBeforeSharesTheRoundTrip(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			_, rdb, cnt := start(t, nil)
			b := tr.new(rdb, 2)
			defer b.Stop()
			// The Before's key lies in another lane than the call's: it goes out all the same.
			before := &Call{Script: incr, Keys: []string{"label"}, Args: []any{7}, Done: make(chan *Call, 1)}
			done := make(chan *Call, 1)
			c := &Call{Script: incr, Keys: []string{"lock"}, Args: []any{1}, Done: done, Before: before}
			if !b.Send(c) {
				t.Fatal("Send = false")
			}
			if got := wait(t, done, 10*time.Second); got != c || c.Err != nil || c.Val != 1 {
				t.Fatalf("call: %+v", got)
			}
			if got := wait(t, before.Done, 10*time.Second); got.Err != nil || got.Val != 7 {
				t.Fatalf("before: %+v", got)
			}
			if tr.name == "goredis" && (cnt.roundTrips() != 1 || cnt.pipelined.Load() != 2) {
				t.Fatalf("%d round trips carrying %d pipelined commands; want 1 carrying both", cnt.roundTrips(), cnt.pipelined.Load())
			}
		})
	}
}
