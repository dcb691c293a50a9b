package batch

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/faultproxy"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestRoundTripContext: a lane's reused context ends at its round trip's deadline and
// then stays ended, as a context must; a timer that fires late, after the round trip or
// into the next, ends nothing.
func TestRoundTripContext(t *testing.T) {
	rt := newRoundTrip()
	defer rt.timer.Stop()
	ctx := rt.start(time.Now().Add(time.Hour), time.Now(), nil)
	rt.expire() // a timer of an earlier round trip, late
	if ctx.Err() != nil {
		t.Fatalf("Err = %v before the deadline", ctx.Err())
	}
	if !rt.end() {
		t.Fatal("not reusable after a round trip that ended in time")
	}
	rt.expire() // late again, between round trips
	if rt.Err() != nil {
		t.Fatal("ended between round trips")
	}

	ctx = rt.start(time.Now().Add(20*time.Millisecond), time.Now(), nil)
	if d, ok := ctx.Deadline(); !ok || time.Until(d) > 20*time.Millisecond {
		t.Fatalf("Deadline = %v, %v", d, ok)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("Done not closed 5s after the deadline")
	}
	if rt.end() {
		t.Fatal("reusable after its deadline passed")
	}
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("Err = %v after the round trip that expired", ctx.Err())
	}
}

// TestRoundTripDerivedContexts: contexts derived from a lane's context (as go-redis and
// hooks derive them) see it end at the deadline, and its end stays consistent after the
// round trip: the context package panics on a parent whose Err goes back to nil.
func TestRoundTripDerivedContexts(t *testing.T) {
	for range 50 {
		rt := newRoundTrip()
		ctx := rt.start(time.Now().Add(time.Millisecond), time.Now(), nil)
		child, cancel := context.WithTimeout(ctx, time.Hour)
		<-ctx.Done()
		rt.end() // the round trip ends as soon as it fails, before the child hears of it
		<-child.Done()
		if !errors.Is(child.Err(), context.DeadlineExceeded) {
			t.Fatalf("child Err = %v", child.Err())
		}
		cancel()
	}
}

// TestCallNotSentAfterDeadline: a call to a server that cannot be reached is never sent
// once its deadline has passed, though go-redis redials and retries: it would land after
// its caller gave up on it (and undid it).
func TestCallNotSentAfterDeadline(t *testing.T) {
	srv := redistest.Start(t)
	p := faultproxy.New(t, srv.Addr)
	opts := srv.Options()
	opts.Addr = p.Addr
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	b := New(rdb, 1)
	defer b.Stop()
	p.Cut(t)
	replies := make(chan *Call, 1)
	c := &Call{Script: incr, Keys: []string{"late"}, Args: []any{1}, Deadline: time.Now().Add(100 * time.Millisecond), Done: replies}
	if !b.Send(c) {
		t.Fatal("Send = false")
	}
	time.Sleep(250 * time.Millisecond) // past the deadline, while go-redis may still redial
	p.Restore(t)
	r := <-replies
	if r.Err == nil {
		t.Fatalf("a call to a cut-off server succeeded: %d", r.Val)
	}
	time.Sleep(time.Second)
	if n, err := srv.Client(t).Exists(ctx, "late").Result(); err != nil || n != 0 {
		t.Fatalf("the call landed after its deadline (exists %d, %v); it failed with %v", n, err, r.Err)
	}
}
