package batch

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// callerKey is the key of a value in a caller's context, as a tracer keeps its span.
type callerKey struct{}

func caller(name string) context.Context {
	return context.WithValue(context.Background(), callerKey{}, name)
}

// valuesHook records, for every round trip of scripts (a command or a pipeline), the
// caller's value its context has and the context itself. A round trip whose value is
// "blocker" waits for release, so that the calls sent meanwhile queue for the next one.
type valuesHook struct {
	blocked chan struct{} // closed as the blocker's round trip starts
	release chan struct{}

	mu   sync.Mutex
	seen []any
	ctxs []context.Context
}

func (h *valuesHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *valuesHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if !setup(cmd) {
			h.record(ctx)
		}
		return next(ctx, cmd)
	}
}

func (h *valuesHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && !setup(cmds[0]) {
			h.record(ctx)
		}
		return next(ctx, cmds)
	}
}

func (h *valuesHook) record(ctx context.Context) {
	v := ctx.Value(callerKey{})
	h.mu.Lock()
	h.seen = append(h.seen, v)
	h.ctxs = append(h.ctxs, ctx)
	h.mu.Unlock()
	if v == "blocker" {
		close(h.blocked)
		<-h.release
	}
}

// roundTrips returns what the round trips other than the blocker's had.
func (h *valuesHook) roundTrips() (seen []any, ctxs []context.Context) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for i, v := range h.seen {
		if v != "blocker" {
			seen, ctxs = append(seen, v), append(ctxs, h.ctxs[i])
		}
	}
	return seen, ctxs
}

// TestRoundTripCarriesCallerValues: a round trip's context, as go-redis's hooks see it,
// has the values of its calls' caller when every call of it has the same (Call.Values),
// through the lanes, with and without a deadline, SendAll and an acked batcher; none when
// the calls are of different callers, or some of none; and it keeps no caller's values
// once the round trip has ended.
func TestRoundTripCarriesCallerValues(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	// SendAll's pipeline does not wait for the blocked lane, so it can reach the server
	// before any EVAL of echo has: loaded up front, no NOSCRIPT adds a round trip.
	loader := redis.NewClient(srv.Options())
	if err := echo.Load(context.Background(), loader).Err(); err != nil {
		t.Fatal(err)
	}
	_ = loader.Close()
	a, b := caller("a"), caller("b")
	lanes := func(rdb *redis.Client) *Batcher { return goredis(rdb, 1) }
	acked := func(rdb *redis.Client) *Batcher {
		return NewAcked(rdb, 1, Acks{Replicas: 1, Timeout: 10 * time.Millisecond}) // no replica: WAIT answers 0
	}
	for _, tc := range []struct {
		name       string
		new        func(rdb *redis.Client) *Batcher
		sendAll    bool
		noDeadline bool
		values     []context.Context // one call each, in one round trip
		want       any
	}{
		{name: "one call", new: lanes, values: []context.Context{a}, want: "a"},
		{name: "one caller's calls", new: lanes, values: []context.Context{a, a, a}, want: "a"},
		{name: "two callers", new: lanes, values: []context.Context{a, b}, want: nil},
		{name: "a caller and none", new: lanes, values: []context.Context{a, nil}, want: nil},
		{name: "no caller", new: lanes, values: []context.Context{nil}, want: nil},
		{name: "no deadline", new: lanes, noDeadline: true, values: []context.Context{a, a}, want: "a"},
		{name: "SendAll, one caller", new: lanes, sendAll: true, values: []context.Context{a, a}, want: "a"},
		{name: "SendAll, two callers", new: lanes, sendAll: true, values: []context.Context{a, b}, want: nil},
		{name: "acked, one caller", new: acked, values: []context.Context{a, a}, want: "a"},
		{name: "acked, two callers", new: acked, values: []context.Context{b, a}, want: nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb := redis.NewClient(srv.Options())
			defer rdb.Close()
			h := &valuesHook{blocked: make(chan struct{}), release: make(chan struct{})}
			rdb.AddHook(h)
			bt := tc.new(rdb)
			defer bt.Stop()
			done := make(chan *Call, len(tc.values)+1)
			deadline := time.Now().Add(20 * time.Second)
			if tc.noDeadline {
				deadline = time.Time{}
			}
			newCall := func(values context.Context) *Call {
				return &Call{Script: echo, Keys: []string{"values"}, Args: []any{1}, Deadline: deadline, Values: values, Done: done}
			}
			// The lane is held in the blocker's round trip while the calls queue.
			bt.Send(newCall(caller("blocker")))
			select {
			case <-h.blocked:
			case <-time.After(20 * time.Second):
				t.Fatal("the blocker's round trip did not start")
			}
			calls := make([]*Call, len(tc.values))
			for i, v := range tc.values {
				calls[i] = newCall(v)
			}
			if tc.sendAll {
				bt.SendAll(calls)
			} else {
				for _, c := range calls {
					bt.Send(c)
				}
			}
			close(h.release)
			for range len(calls) + 1 {
				if c := wait(t, done, 20*time.Second); c.Err != nil {
					t.Fatal(c.Err)
				}
			}
			seen, ctxs := h.roundTrips()
			if len(seen) != 1 || seen[0] != tc.want {
				t.Fatalf("the round trips of the calls had the values %v; want one, with %v", seen, tc.want)
			}
			if tc.noDeadline || tc.sendAll {
				return // a context of the round trip's own, which the batcher keeps no more
			}
			// The lane's reused context drops the values as the round trip ends, just
			// after the replies are handed back.
			for end := time.Now().Add(10 * time.Second); ctxs[0].Value(callerKey{}) != nil; {
				if time.Now().After(end) {
					t.Fatalf("the lane's context still has the caller's value %v after its round trip", ctxs[0].Value(callerKey{}))
				}
				time.Sleep(time.Millisecond)
			}
		})
	}
}

// TestRoundTripDropsValues: a lane's reused context has the values it was started with
// until the round trip ends, also one that ended at its deadline, and none after; a
// context derived from it still ends at its deadline when the caller's context (whose
// values it has) is a cancelable one that has not ended.
func TestRoundTripDropsValues(t *testing.T) {
	callerCtx, cancel := context.WithCancel(caller("a"))
	defer cancel()
	for _, within := range []time.Duration{time.Hour, time.Millisecond} {
		rt := newRoundTrip()
		ctx := rt.start(time.Now().Add(within), time.Now(), callerCtx)
		if v := ctx.Value(callerKey{}); v != "a" {
			t.Fatalf("within %v: Value = %v during the round trip, want a", within, v)
		}
		child, cancelChild := context.WithTimeout(ctx, 2*time.Hour)
		if within < time.Hour {
			select {
			case <-child.Done():
			case <-time.After(5 * time.Second):
				t.Fatal("a context derived from the round trip's did not end 5s after its deadline")
			}
			if err := context.Cause(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Cause = %v after the deadline, want DeadlineExceeded", err)
			}
		}
		rt.end()
		cancelChild()
		if v := ctx.Value(callerKey{}); v != nil {
			t.Fatalf("within %v: Value = %v after the round trip ended", within, v)
		}
		rt.timer.Stop()
	}
}

// uncomparable is a context of a type whose values cannot be compared, as a program may
// define one.
type uncomparable struct {
	context.Context
	tags []string
}

// TestSharedValues: the values of a round trip are its calls' when all have the same
// context, and none otherwise, also for contexts whose comparison would panic.
func TestSharedValues(t *testing.T) {
	a, b := caller("a"), caller("b")
	u1 := uncomparable{Context: a, tags: []string{"x"}}
	u2 := uncomparable{Context: a, tags: []string{"x"}}
	for _, tc := range []struct {
		name   string
		values []context.Context
		want   context.Context
	}{
		{"none", nil, nil},
		{"one", []context.Context{a}, a},
		{"the same", []context.Context{a, a, a}, a},
		{"different", []context.Context{a, a, b}, nil},
		{"some without", []context.Context{nil, a}, nil},
		{"all without", []context.Context{nil, nil}, nil},
		{"uncomparable alone", []context.Context{u1}, u1},
		{"uncomparable", []context.Context{u1, u2}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := make([]*Call, len(tc.values))
			for i, v := range tc.values {
				calls[i] = &Call{Values: v}
			}
			got := sharedValues(calls)
			if (got == nil) != (tc.want == nil) || (got != nil && got.Value(callerKey{}) != tc.want.Value(callerKey{})) {
				t.Fatalf("sharedValues = %v, want %v", got, tc.want)
			}
		})
	}
}
