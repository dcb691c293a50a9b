package batch

import (
	"context"
	"sync"
	"sync/atomic"
	"time"
)

// A round trip's context ends at the latest deadline of its calls. go-redis's dials,
// its wait for a pooled connection and its retries (MaxRetries, and the pool's redials)
// stop when it ends, so that they cannot send a call after every caller stopped waiting
// for it: an acquisition that its caller gave up and undid would otherwise land after the
// undo (seen with a server cut off for 250ms: the pool redialled every 100ms and sent it
// once the server was back), and keep the lock out of reach on that node for a whole
// TTL. A write or read under way on the socket is bounded by WriteTimeout and ReadTimeout
// alone (go-redis applies the context to them only with ContextTimeoutEnabled): a round
// trip to a server that does not answer outlasts its context, and the lane's exec reports
// that it did (Stop's drain gives up on the server then).

// A round trip's context also has the values of its callers' context (Call.Values), so
// that go-redis's hooks see them: a tracing hook (redisotel) finds the caller's span there
// and makes the round trip's span its child. A round trip has one context, and the calls
// of several callers may share it; it then has no values, since a span under another
// caller's span would be worse than one under none. Calls made for no caller (renewals)
// have none either. The values are dropped when the round trip ends, so that no caller's
// context outlives its round trip in a lane's reused context.

// sharedValues is the context whose values calls' round trip carries: their Values if
// they all have the same, else nil.
func sharedValues(calls []*Call) context.Context {
	if len(calls) == 0 {
		return nil
	}
	v := calls[0].Values
	for _, c := range calls[1:] {
		if !sameContext(c.Values, v) {
			return nil
		}
	}
	return v
}

// sameContext reports a == b; false where comparing them panics (two contexts of one
// type that cannot be compared, which a program may define).
func sameContext(a, b context.Context) (same bool) {
	defer func() {
		if recover() != nil {
			same = false
		}
	}()
	return a == b
}

// valuesOnly is a context with values's values and no deadline or cancellation
// (Background if values is nil), for a round trip without a deadline.
func valuesOnly(values context.Context) context.Context {
	if values == nil {
		return context.Background()
	}
	return context.WithoutCancel(values)
}

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
	// values is guarded by mu: the context whose values the round trip under way has
	// (sharedValues), nil between round trips, so that none is kept.
	values context.Context
}

func newRoundTrip() *roundTrip {
	rt := &roundTrip{done: make(chan struct{})}
	rt.timer = time.AfterFunc(time.Hour, rt.expire)
	rt.timer.Stop()
	return rt
}

// start begins a round trip that ends at d, now being the time, and returns its context,
// which has values's values (none if values is nil) until end.
func (rt *roundTrip) start(d, now time.Time, values context.Context) context.Context {
	rt.deadline.Store(d.UnixNano())
	rt.mu.Lock()
	rt.active = true
	rt.values = values
	rt.mu.Unlock()
	rt.timer.Reset(d.Sub(now))
	return rt
}

// end ends the round trip and reports whether rt can serve the next one: false once its
// deadline has passed during one.
func (rt *roundTrip) end() (reusable bool) {
	rt.timer.Stop()
	rt.mu.Lock()
	defer rt.mu.Unlock()
	rt.active = false
	rt.values = nil
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

// Value is the value of the round trip's callers' context (see sharedValues). Package
// context finds a cancelable ancestor through Value too; it finds the caller's, whose
// Done is not rt's, so it treats rt as the custom context it is (and context.Cause of an
// ended rt is its Err, unless the caller's context has ended too, with a cause).
func (rt *roundTrip) Value(key any) any {
	rt.mu.Lock()
	values := rt.values
	rt.mu.Unlock()
	if values == nil {
		return nil
	}
	return values.Value(key)
}

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
