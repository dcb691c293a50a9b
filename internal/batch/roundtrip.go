package batch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A round trip's context ends at the latest deadline of its calls. go-redis bounds every
// dial, write and read of the round trip by it, and its retries (MaxRetries, and the
// pool's redials) stop when it ends, so that they cannot send a call after every caller
// stopped waiting for it: an acquisition that its caller gave up and undid would
// otherwise land after the undo (seen with a server cut off for 250ms: the pool redialled
// every 100ms and sent it once the server was back), and keep the lock out of reach on
// that node for a whole TTL.

// latestDeadline is the latest deadline of calls, if they all have one.
func latestDeadline(calls []*Call) (latest time.Time, ok bool) {
	for _, c := range calls {
		if c.Deadline.IsZero() {
			return time.Time{}, false
		}
		if c.Deadline.After(latest) {
			latest = c.Deadline
		}
	}
	return latest, len(calls) > 0
}

// roundTrip is a lane's context for its round trips, reused from one to the next (a lane
// runs one at a time) until a deadline passes during one: go-redis asks every command's
// context for Done, and a context.WithDeadline per round trip cost five allocations, half
// again what a Lock+Unlock otherwise makes. Once its deadline has closed Done it stays
// ended, as a context must (contexts derived from it rely on that), and the lane takes a
// new one.
type roundTrip struct {
	deadline atomic.Int64 // Unix nanoseconds: the deadline of the round trip under way
	timer    *time.Timer  // runs expire at the deadline

	mu     sync.Mutex
	done   chan struct{} // guarded by mu
	closed bool          // guarded by mu: done is closed, for good
	active bool          // guarded by mu: a round trip is under way
}

func newRoundTrip() *roundTrip {
	rt := &roundTrip{done: make(chan struct{})}
	rt.timer = time.AfterFunc(time.Hour, rt.expire)
	rt.timer.Stop()
	return rt
}

// start begins a round trip that ends at d and returns its context.
func (rt *roundTrip) start(d time.Time) context.Context {
	rt.deadline.Store(d.UnixNano())
	rt.mu.Lock()
	rt.active = true
	rt.mu.Unlock()
	rt.timer.Reset(time.Until(d))
	return rt
}

// end ends the round trip and reports whether rt can serve the next one: false once its
// deadline has passed during one.
func (rt *roundTrip) end() (reusable bool) {
	rt.timer.Stop()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.active = false
	return !rt.closed
}

// expire closes the channel if a round trip is under way and past its deadline: a timer
// that fires late, after end or the next start, finds nothing to end.
func (rt *roundTrip) expire() {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.active && !rt.closed && time.Now().UnixNano() >= rt.deadline.Load() {
		close(rt.done)
		rt.closed = true
	}
}

func (rt *roundTrip) Deadline() (time.Time, bool) { return time.Unix(0, rt.deadline.Load()), true }
func (rt *roundTrip) Value(any) any               { return nil }

func (rt *roundTrip) Done() <-chan struct{} {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	return rt.done
}

func (rt *roundTrip) Err() error {
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if rt.closed {
		return context.DeadlineExceeded
	}
	return nil
}
