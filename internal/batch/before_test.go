package batch

import (
	"strconv"
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

// TestBeforeSentOnceWhenTheCallWaitsForRoom: a call whose lane is full is refused by
// TrySend and then queued by Send, as quorum.Fanout does (it sends the call again on a
// goroutine of its own); its Before, whose lane has room, goes out at most once and is
// answered at most once. The engine's Before has room for one reply (owner.write): a
// second one would block the transport's goroutine that answers it, and every call
// behind it, for good.
func TestBeforeSentOnceWhenTheCallWaitsForRoom(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			srv, rdb, _ := start(t, nil)
			b := tr.new(rdb, 2)
			defer b.Stop()
			lock, label := keysInTwoLanes(2)
			fillers := make(chan *Call, 8*maxBatch)
			srv.Pause(t)
			queued := fillLane(b, lock, fillers)
			before := &Call{Script: incr, Keys: []string{label}, Args: []any{7}, Done: make(chan *Call, 2)}
			done := make(chan *Call, 1)
			c := &Call{Script: incr, Keys: []string{lock}, Args: []any{1}, Done: done, Before: before,
				Deadline: time.Now().Add(50 * time.Millisecond)}
			if b.TrySend(c) {
				t.Fatal("TrySend to a full lane = true")
			}
			if !b.Send(c) {
				t.Fatal("Send = false")
			}
			if got := wait(t, done, 10*time.Second); !IsExpired(got.Err) {
				t.Fatalf("the call that found no room: %v, want the expiry error", got.Err)
			}
			srv.Resume(t)
			for range queued {
				wait(t, fillers, 10*time.Second)
			}
			answers := 0
			for deadline := time.After(time.Second); answers < 2; {
				select {
				case <-before.Done:
					answers++
					continue
				case <-deadline:
				}
				break
			}
			if ran, _ := rdb.Get(ctx, label).Int64(); answers > 1 || ran > 7 {
				t.Fatalf("the Before was answered %d times and ran %d times; want once at most", answers, ran/7)
			}
		})
	}
}

// keysInTwoLanes returns two keys that go to different lanes of a batcher with lanes
// lanes (tagHash).
func keysInTwoLanes(lanes int) (a, b string) {
	a = "lock"
	for i := 0; ; i++ {
		b = "label" + strconv.Itoa(i)
		if tagHash(a)%uint32(lanes) != tagHash(b)%uint32(lanes) {
			return a, b
		}
	}
}

// fillLane sends calls on key with TrySend until the lane refuses one (its server paused),
// and returns how many it queued; they are answered on done.
func fillLane(b *Batcher, key string, done chan *Call) int {
	n := 0
	for ; n < cap(done); n++ {
		if !b.TrySend(&Call{Script: incr, Keys: []string{key}, Args: []any{1}, Done: done}) {
			return n
		}
	}
	return n
}
