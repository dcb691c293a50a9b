package quorum

import (
	"testing"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// An expiry ends only the wait it was set for. A wait that ends on a reply just as its
// timer fires leaves that expiry behind, sent or about to be: its waker must not serve a
// later wait, which would end at once. Each round races a reply against the timer, and
// the next wait, whose reply comes 1ms later, must see it.
func TestAwaitExpiryEndsOnlyItsOwnWait(t *testing.T) {
	t.Parallel()
	tallyAll := func(*batch.Call) bool { return false }
	answer := func(replies chan *batch.Call, after time.Duration) {
		go func() {
			time.Sleep(after)
			replies <- &batch.Call{}
		}()
	}
	for round := range 300 {
		replies := getReplies(1)
		answer(replies, 50*time.Microsecond)
		await(ctx, replies, 1, 50*time.Microsecond, tallyAll) // the reply or the expiry
		replies = getReplies(1)
		answer(replies, time.Millisecond)
		if seen := await(ctx, replies, 1, 10*time.Second, tallyAll); seen != 1 {
			t.Fatalf("round %d: a wait whose reply came after 1ms ended with %d seen", round, seen)
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
