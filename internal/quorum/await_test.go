package quorum

import (
	"testing"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// A wait that ran out leaves nothing behind for the next one: its waker fired and is not
// reused, so no later wait of this goroutine or another ends on that expiry.
func TestAwaitExpiryEndsOnlyItsOwnWait(t *testing.T) {
	t.Parallel()
	tallyAll := func(*batch.Call) bool { return false }
	for round := range 20 {
		replies := getReplies(1)
		if seen := await(ctx, replies, 1, time.Millisecond, tallyAll); seen != 0 {
			t.Fatalf("round %d: a wait with no reply saw %d", round, seen)
		}
		for range 5 {
			replies := getReplies(1)
			go func() {
				time.Sleep(2 * time.Millisecond)
				replies <- &batch.Call{}
			}()
			if seen := await(ctx, replies, 1, 10*time.Second, tallyAll); seen != 1 {
				t.Fatalf("round %d: a wait whose reply came after 2ms ended with %d seen", round, seen)
			}
		}
	}
}

// BenchmarkAwait is the wait for one reply that another goroutine sends: the timer, the
// select and the hand-over of a Lock's or Unlock's wait, without Redis.
func BenchmarkAwait(b *testing.B) {
	calls := make(chan chan *batch.Call)
	done := make(chan struct{})
	defer close(done)
	go func() {
		for {
			select {
			case r := <-calls:
				r <- &batch.Call{}
			case <-done:
				return
			}
		}
	}()
	decided := func(*batch.Call) bool { return true }
	b.ReportAllocs()
	for b.Loop() {
		replies := getReplies(1)
		calls <- replies
		if await(ctx, replies, 1, time.Second, decided) != 1 {
			b.Fatal("no reply")
		}
	}
}
