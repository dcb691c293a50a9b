package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// bounded is start with ContextTimeoutEnabled: the clients whose calls TryRun may send
// from the caller's goroutine.
func bounded(t *testing.T, opts func(*redis.Options)) (*redis.Client, *counter, func(tb testing.TB)) {
	srv, rdb, cnt := start(t, func(o *redis.Options) {
		o.ContextTimeoutEnabled = true
		if opts != nil {
			opts(o)
		}
	})
	return rdb, cnt, srv.Pause
}

// TestRunAnswersBeforeReturning: on an idle lane of a bounded client, TryRun sends the call
// itself, with its caller's values in the round trip's context, and returns with the reply
// on Done; on a client that is not bounded, or without a deadline, it only queues the call.
func TestRunAnswersBeforeReturning(t *testing.T) {
	t.Parallel()
	rdb, _, _ := bounded(t, nil)
	hook := &valuesHook{}
	rdb.AddHook(hook)
	b := New(rdb, 1)
	defer b.Stop()
	done := make(chan *Call, 1)
	for i := range 3 {
		c := &Call{Script: incr, Keys: []string{"k"}, Args: []any{1}, Deadline: time.Now().Add(10 * time.Second), Done: done, Values: caller("me")}
		if !b.TryRun(c) {
			t.Fatal("TryRun = false")
		}
		select {
		case got := <-done:
			if got.Err != nil || got.Val != int64(i+1) {
				t.Fatalf("reply %d, %v; want %d", got.Val, got.Err, i+1)
			}
		default:
			t.Fatal("TryRun returned before the reply was in")
		}
	}
	if seen, _ := hook.roundTrips(); len(seen) != 3 || seen[2] != "me" {
		t.Fatalf("round trips saw %v; want the caller's value", seen)
	}
	// Not bounded: queued for the worker, which a paused server holds up.
	srv, plain, _ := start(t, nil)
	pb := New(plain, 1)
	defer pb.Stop()
	srv.Pause(t)
	defer srv.Resume(t)
	start := time.Now()
	if !pb.TryRun(&Call{Script: incr, Keys: []string{"k"}, Args: []any{1}, Deadline: time.Now().Add(5 * time.Second), Done: make(chan *Call, 1)}) {
		t.Fatal("TryRun = false")
	}
	if took := time.Since(start); took > time.Second {
		t.Fatalf("TryRun on a client that is not bounded took %v: it must only queue", took)
	}
}

// TestRunKeepsOrder: calls of one lane go out in the order they were sent, whether queued
// (TrySend) or sent by their caller (TryRun), and never in two round trips at once: each
// goroutine's counter is written twice in a row and read back, and a call that overtook its
// predecessor, or ran beside it, would see the wrong sum.
func TestRunKeepsOrder(t *testing.T) {
	t.Parallel()
	rdb, cnt, _ := bounded(t, nil)
	b := New(rdb, 1)
	defer b.Stop()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			key := fmt.Sprintf("order:%d", g)
			done := make(chan *Call, 2)
			for i := range 200 {
				d := time.Now().Add(10 * time.Second)
				first := &Call{Script: incr, Keys: []string{key}, Args: []any{1}, Deadline: d, Done: done}
				second := &Call{Script: incr, Keys: []string{key}, Args: []any{1}, Deadline: d, Done: done}
				if !b.TrySend(first) || !b.TryRun(second) {
					t.Error("refused")
					return
				}
				for range 2 {
					if c := wait(t, done, 10*time.Second); c.Err != nil {
						t.Error(c.Err)
						return
					}
				}
				if first.Val != int64(2*i+1) || second.Val != int64(2*i+2) {
					t.Errorf("%s round %d: %d then %d; want %d then %d", key, i, first.Val, second.Val, 2*i+1, 2*i+2)
					return
				}
			}
		})
	}
	wg.Wait()
	if cnt.roundTrips() == 0 {
		t.Fatal("no round trip counted")
	}
}

// TestRunHungServer: a caller that sends its own call to a server that does not answer is
// back by the call's deadline, with a failure; a call past its deadline is not sent; and
// Stop waits for the caller's round trip as for a worker's.
func TestRunHungServer(t *testing.T) {
	t.Parallel()
	rdb, _, pause := bounded(t, func(o *redis.Options) {
		o.MaxRetries = -1
		o.ReadTimeout = 10 * time.Second
	})
	b := New(rdb, 1)
	done := make(chan *Call, 2)
	late := &Call{Script: incr, Keys: []string{"k"}, Args: []any{1}, Deadline: time.Now().Add(-time.Millisecond), Done: done}
	if !b.TryRun(late) {
		t.Fatal("TryRun = false")
	}
	if c := wait(t, done, time.Second); !IsExpired(c.Err) {
		t.Fatalf("a call past its deadline: %d, %v; want the expiry error", c.Val, c.Err)
	}
	pause(t)
	start := time.Now()
	c := &Call{Script: incr, Keys: []string{"k"}, Args: []any{1}, Deadline: start.Add(300 * time.Millisecond), Done: done}
	ran := make(chan struct{})
	go func() {
		defer close(ran)
		b.TryRun(c)
	}()
	time.Sleep(50 * time.Millisecond)
	stopped := make(chan struct{})
	go func() { b.Stop(); close(stopped) }()
	select {
	case <-stopped:
		t.Fatal("Stop returned while a caller's round trip was under way")
	case <-ran:
		t.Fatal("TryRun returned before its deadline from a server that does not answer")
	case <-time.After(100 * time.Millisecond):
	}
	<-ran
	if took := time.Since(start); took > 3*time.Second {
		t.Fatalf("TryRun took %v with a 300ms deadline", took)
	}
	if got := wait(t, done, time.Second); got.Err == nil || !errors.Is(got.Err, context.DeadlineExceeded) && !isTimeout(got.Err) {
		t.Fatalf("call to a server that does not answer: %d, %v; want a timeout", got.Val, got.Err)
	}
	<-stopped
	if b.TryRun(&Call{Script: incr, Keys: []string{"k"}, Deadline: time.Now().Add(time.Second), Done: done}) {
		t.Fatal("TryRun = true after Stop")
	}
}

func isTimeout(err error) bool {
	var te interface{ Timeout() bool }
	return errors.As(err, &te) && te.Timeout()
}

// TestRunNoScriptAndBefore: a caller's own round trip loads a flushed script again, and
// carries the call's Before ahead of it.
func TestRunNoScriptAndBefore(t *testing.T) {
	t.Parallel()
	rdb, cnt, _ := bounded(t, nil)
	b := New(rdb, 1)
	defer b.Stop()
	done := make(chan *Call, 1)
	send := func(c *Call) *Call {
		t.Helper()
		c.Deadline, c.Done = time.Now().Add(10*time.Second), done
		if !b.TryRun(c) {
			t.Fatal("TryRun = false")
		}
		return wait(t, done, time.Second)
	}
	if c := send(&Call{Script: incr, Keys: []string{"k"}, Args: []any{1}}); c.Err != nil || c.Val != 1 {
		t.Fatalf("first: %d, %v", c.Val, c.Err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if c := send(&Call{Script: incr, Keys: []string{"k"}, Args: []any{1}}); c.Err != nil || c.Val != 2 {
		t.Fatalf("after SCRIPT FLUSH: %d, %v", c.Val, c.Err)
	}
	before := &Call{Script: incr, Keys: []string{"label"}, Args: []any{7}, Done: make(chan *Call, 1)}
	trips := cnt.roundTrips()
	if c := send(&Call{Script: incr, Keys: []string{"k"}, Args: []any{1}, Before: before}); c.Err != nil || c.Val != 3 {
		t.Fatalf("with a Before: %d, %v", c.Val, c.Err)
	}
	if got := wait(t, before.Done, time.Second); got.Err != nil || got.Val != 7 {
		t.Fatalf("before: %d, %v", got.Val, got.Err)
	}
	if n := cnt.roundTrips() - trips; n != 1 {
		t.Fatalf("%d round trips for a call and its Before; want 1", n)
	}
}
