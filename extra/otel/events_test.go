package dlockotel_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
	if len(s.Events) != 1 || s.Events[0].Name != "exception" {
		t.Errorf("span events %v, want the error, as one exception event", s.Events)
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
	// About the ctx's 200ms: the wait may end a little before the deadline, at its own
	// timer, and be timed from just after the ctx was made.
	if waited, _ := attr(s, "dlock.wait.duration"); waited.AsFloat64() < 0.15 {
		t.Errorf("dlock.wait.duration %vs, want about the ctx's 0.2s", waited.AsFloat64())
	}
	if got := s.EndTime.Sub(s.StartTime); got < 150*time.Millisecond {
		t.Errorf("span lasts %v, want about the ctx's 200ms", got)
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
	var ends holdEnds
	client := srv.NewClient(dlock.WithObserver(r.tel.Observer()), ends.observer())
	lease, err := client.Mutex("hung", dlock.TTL(600*time.Millisecond)).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv.Pause()
	defer srv.Resume()
	dlocktest.AssertLost(t, lease, 5*time.Second)
	// Reported at ValidUntil at the latest; the slack is for a loaded machine's scheduler.
	if !ends.await(1, time.Until(lease.ValidUntil())+time.Second) {
		t.Fatal("the loss was not reported a second after ValidUntil")
	}
	m := r.metrics(t)
	if got := m.sum("dlock.losses", kv("dlock.hold.end", "expired")); got != 1 {
		t.Errorf("dlock.losses{expired} = %d, want 1", got)
	}
	if got := m.sum("dlock.renewal.failures"); got < 1 {
		t.Errorf("dlock.renewal.failures = %d, want at least 1: renewals were sent to a hung server", got)
	}
	if got := m.sum("dlock.leases.held"); got != 0 {
		t.Errorf("dlock.leases.held = %d after the loss, want 0", got)
	}
	var holds int
	for _, s := range r.spans.GetSpans() {
		if end, ok := attr(s, "dlock.hold.end"); ok {
			holds++
			if end.AsString() != "expired" || s.Status.Code != codes.Error || !hasReason(s) {
				t.Errorf("the hold's span has end %q, status %v and reason %v, want expired, Error and a reason", end.AsString(), s.Status.Code, hasReason(s))
			}
		}
	}
	if holds != 1 {
		t.Errorf("%d hold spans, want 1", holds)
	}
}

// TestHandOffsAreCounted: goroutines of one process that wait for a Mutex get it in turn,
// the second from the first by a local hand-off (without a round trip), which
// dlock.handoffs counts as local; each hand-off is an acquisition.
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
	// Two goroutines queue behind first: the one that gets it from first's release
	// reserves a fencing token for the other, so that it can hand the lock over.
	var wg sync.WaitGroup
	errs := make(chan error, 2)
	for i := range 2 {
		wg.Go(func() {
			lease, err := client.Mutex("hot").Lock(ctx)
			if err == nil {
				err = lease.Unlock(ctx)
			}
			errs <- err
		})
		if !eventually(10*time.Second, func() bool { return r.metrics(t).sum("dlock.waiters") == int64(i+1) }) {
			t.Fatalf("Lock %d was not under way within 10s", i+1)
		}
		time.Sleep(100 * time.Millisecond) // past its first attempt, into the local queue
	}
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("a waiting Lock: %v", err)
		}
	}
	m := r.metrics(t)
	t.Logf("hand-offs: local %d, grant %d", m.sum("dlock.handoffs", kv("dlock.handoff", "local")), m.sum("dlock.handoffs", kv("dlock.handoff", "grant")))
	if got := m.sum("dlock.handoffs", kv("dlock.handoff", "local")); got != 1 {
		t.Errorf("dlock.handoffs{local} = %d, want 1", got)
	}
	if got := m.sum("dlock.acquisitions"); got != 3 {
		t.Errorf("dlock.acquisitions = %d, want 3 (hand-offs are acquisitions)", got)
	}
}

// TestGrantsAreCounted: a release by another process grants the lock to this process's
// waiter, in Redis, which dlock.handoffs counts as a grant.
func TestGrantsAreCounted(t *testing.T) {
	srv := dlocktest.Start(t)
	r := newRig(t)
	client := srv.NewClient(dlock.WithObserver(r.tel.Observer()))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	holder, err := srv.NewClient().Mutex("granted").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() {
		lease, err := client.Mutex("granted").Lock(ctx)
		if err == nil {
			err = lease.Unlock(ctx)
		}
		done <- err
	}()
	if !eventually(10*time.Second, func() bool { return r.metrics(t).sum("dlock.attempts", kv("dlock.verdict", "held")) >= 1 }) {
		t.Fatal("the waiter made no attempt within 10s")
	}
	time.Sleep(100 * time.Millisecond) // listening for the release
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("the waiting Lock: %v", err)
	}
	m := r.metrics(t)
	if got := m.sum("dlock.handoffs", kv("dlock.handoff", "grant")); got != 1 {
		t.Errorf("dlock.handoffs{grant} = %d, want 1", got)
	}
	if got := m.sum("dlock.acquisitions"); got != 1 {
		t.Errorf("dlock.acquisitions = %d, want 1", got)
	}
}

// TestVerdictOnlyWhenItIsTheCallsOwn: attempts name their lock but not their call, so a
// call's span carries the verdict of its last attempt only when no other call of the
// same lock overlapped it; overlapping calls carry none rather than a wrong one.
func TestVerdictOnlyWhenItIsTheCallsOwn(t *testing.T) {
	srv := dlocktest.Start(t)
	r := newRig(t)
	client := srv.NewClient(dlock.WithObserver(r.tel.Observer()))
	ctx := context.Background()
	holder, err := srv.NewClient().Mutex("contended").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Unlock(ctx)

	waitCtx, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	waited := make(chan error, 1)
	go func() {
		_, err := client.Mutex("contended").Lock(waitCtx)
		waited <- err
	}()
	if !eventually(10*time.Second, func() bool { return r.metrics(t).sum("dlock.waiters") == 1 }) {
		t.Fatal("the Lock was not under way within 10s")
	}
	if _, err := client.Mutex("contended").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while the Lock waits: %v, want ErrNotAcquired", err)
	}
	if err := <-waited; !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("the Lock: %v, want DeadlineExceeded", err)
	}
	if _, err := client.Mutex("contended").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock alone: %v, want ErrNotAcquired", err)
	}

	spans := callSpans(r.spans.GetSpans())
	if len(spans) != 3 {
		t.Fatalf("%d call spans, want 3", len(spans))
	}
	for i, s := range spans {
		v, ok := attr(s, "dlock.verdict")
		switch alone := i == 2; {
		case alone && v.AsString() != "held":
			t.Errorf("the TryLock made alone has verdict %q, want held", v.AsString())
		case !alone && ok:
			t.Errorf("call %d, which overlapped another, has verdict %q, want none", i, v.AsString())
		}
	}
}

// TestSilentNodeIsCounted: a quorum node that hangs is counted once in
// dlock.node.silences, under its address, when it lets a request time out.
func TestSilentNodeIsCounted(t *testing.T) {
	var servers []*dlocktest.RedisServer
	var waiterNodes, holderNodes []redis.UniversalClient
	for range 3 {
		srv := dlocktest.Start(t)
		servers = append(servers, srv)
		waiterNodes = append(waiterNodes, srv.Client())
		holderNodes = append(holderNodes, newRedisClient(t, srv.Addr))
	}
	r := newRig(t)
	waiter, err := dlock.NewQuorum(waiterNodes, dlock.WithObserver(r.tel.Observer()))
	if err != nil {
		t.Fatal(err)
	}
	defer waiter.Close()
	holder, err := dlock.NewQuorum(holderNodes)
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	servers[0].Pause()
	defer servers[0].Resume()
	lease, err := holder.Mutex("silent").Lock(ctx)
	if err != nil {
		t.Fatalf("Lock on a quorum with one node hung: %v", err)
	}
	defer lease.Unlock(ctx)
	wctx, wcancel := context.WithTimeout(ctx, time.Second)
	defer wcancel()
	if _, err := waiter.Mutex("silent").Lock(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock of a held lock: %v, want the ctx's deadline", err)
	}
	m := r.metrics(t)
	if got := m.sum("dlock.node.silences", kv("server.address", servers[0].Addr)); got != 1 {
		t.Errorf("dlock.node.silences{server.address=%s} = %d, want 1", servers[0].Addr, got)
	}
	if got := m.sum("dlock.node.silences"); got != 1 {
		t.Errorf("dlock.node.silences = %d over every node, want 1 (the hung one)", got)
	}
}

// newRedisClient returns a go-redis client of addr with short timeouts, closed when the
// test ends.
func newRedisClient(t *testing.T, addr string) *redis.Client {
	rdb := redis.NewClient(&redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second})
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}
