package otel_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
)

// callSpans are the spans of Lock, TryLock and Acquire calls, in the order they ended.
func callSpans(spans tracetest.SpanStubs) []tracetest.SpanStub {
	var out []tracetest.SpanStub
	for _, s := range spans {
		if _, ok := attr(s, "dlock.wait.outcome"); ok {
			out = append(out, s)
		}
	}
	return out
}

// TestCallThatGaveUpIsAnError: a Lock whose ctx ran out while another client held the
// lock gives a span with status Error, the ctx's error, and the verdict of its last
// attempt; the metrics count it as given up, not as a refusal.
func TestCallThatGaveUpIsAnError(t *testing.T) {
	srv := dlocktest.Start(t)
	r := newRig(t)
	client := srv.NewClient(dlock.WithObserver(r.tel.Observer()))
	ctx := context.Background()
	holder, err := srv.NewClient().Mutex("busy").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Unlock(ctx)

	waitCtx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := client.Mutex("busy").Lock(waitCtx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock while another client holds it, with 200ms: %v, want DeadlineExceeded", err)
	}
	spans := callSpans(r.spans.GetSpans())
	if len(spans) != 1 {
		t.Fatalf("%d call spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Status.Code != codes.Error {
		t.Errorf("span status %v, want Error", s.Status.Code)
	}
	if out, _ := attr(s, "dlock.wait.outcome"); out.AsString() != "gave_up" {
		t.Errorf("outcome %q, want gave_up", out.AsString())
	}
	if v, _ := attr(s, "dlock.verdict"); v.AsString() != "held" {
		t.Errorf("verdict %q, want held", v.AsString())
	}
	if _, ok := attr(s, "dlock.token"); ok {
		t.Errorf("a call that acquired nothing carries a dlock.token")
	}
	if waited, _ := attr(s, "dlock.wait.duration"); waited.AsFloat64() < 0.2 {
		t.Errorf("dlock.wait.duration %vs, want at least the ctx's 0.2s", waited.AsFloat64())
	}
	if got := s.EndTime.Sub(s.StartTime); got < 200*time.Millisecond {
		t.Errorf("span lasts %v, want at least the ctx's 200ms", got)
	}
	m := r.metrics(t)
	if got := m.count("dlock.wait.duration", kv("dlock.wait.outcome", "gave_up")); got != 1 {
		t.Errorf("dlock.wait.duration{gave_up} count = %d, want 1", got)
	}
	if got := m.sum("dlock.refusals"); got != 0 {
		t.Errorf("dlock.refusals = %d, want 0: the call waited and gave up", got)
	}
}

// TestLossToAHungServer: a holder whose server hangs (SIGSTOP) fails its renewals and
// loses the lease at its deadline: the renewal failures are counted, and the loss, with
// the cause "expired", by the time ValidUntil has passed.
func TestLossToAHungServer(t *testing.T) {
	srv := dlocktest.Start(t)
	r := newRig(t)
	client := srv.NewClient(dlock.WithObserver(r.tel.Observer()))
	lease, err := client.Mutex("hung", dlock.TTL(600*time.Millisecond)).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	defer srv.Resume()
	dlocktest.AssertLost(t, lease, 5*time.Second)
	// Reported at ValidUntil at the latest; the slack is for a loaded machine's scheduler.
	deadline := lease.ValidUntil()
	if !eventually(time.Until(deadline)+time.Second, func() bool {
		return r.metrics(t).sum("dlock.losses", kv("dlock.hold.end", "expired")) == 1
	}) {
		t.Fatalf("dlock.losses{expired} = %d a second after ValidUntil, want 1", r.metrics(t).sum("dlock.losses", kv("dlock.hold.end", "expired")))
	}
	m := r.metrics(t)
	if got := m.sum("dlock.renewal.failures"); got < 1 {
		t.Errorf("dlock.renewal.failures = %d, want at least 1: renewals were sent to a hung server", got)
	}
	if got := m.sum("dlock.leases.held"); got != 0 {
		t.Errorf("dlock.leases.held = %d after the loss, want 0", got)
	}
}

// TestHandOffsAreCounted: an Unlock with a goroutine of the same process waiting hands
// the lock over locally, which dlock.handoffs counts as local, and is an acquisition.
func TestHandOffsAreCounted(t *testing.T) {
	srv := dlocktest.Start(t)
	r := newRig(t)
	client := srv.NewClient(dlock.WithObserver(r.tel.Observer()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	first, err := client.Mutex("hot").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var second *dlock.Lease
	var secondErr error
	wg.Go(func() { second, secondErr = client.Mutex("hot").Lock(ctx) })
	// The waiter is counted as one before the Unlock, so that the Unlock finds it.
	if !eventually(10*time.Second, func() bool { return r.metrics(t).sum("dlock.waiters") == 1 }) {
		t.Fatal("the second Lock was not under way within 10s")
	}
	time.Sleep(100 * time.Millisecond) // past its first attempt, into the local queue
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if secondErr != nil {
		t.Fatalf("the waiting Lock: %v", secondErr)
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	m := r.metrics(t)
	if got := m.sum("dlock.handoffs", kv("dlock.handoff", "local")); got != 1 {
		t.Errorf("dlock.handoffs{local} = %d, want 1", got)
	}
	if got := m.sum("dlock.acquisitions"); got != 2 {
		t.Errorf("dlock.acquisitions = %d, want 2 (the hand-off is an acquisition)", got)
	}
}
