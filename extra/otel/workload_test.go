package dlockotel_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
)

// kind takes one kind of lock: lock (Lock, or TryLock with try) on the observed Client,
// and block, which takes the lock on another Client so that lock is refused.
type kind struct {
	kind  string
	lock  func(ctx context.Context, c *dlock.Client, name string, try bool, opts ...dlock.LockOption) (*dlock.Lease, error)
	block func(ctx context.Context, c *dlock.Client, name string) (*dlock.Lease, error)
}

var kinds = []kind{
	{
		kind: dlock.KindMutex,
		lock: func(ctx context.Context, c *dlock.Client, name string, try bool, opts ...dlock.LockOption) (*dlock.Lease, error) {
			if try {
				return c.Mutex(name, opts...).TryLock(ctx)
			}
			return c.Mutex(name, opts...).Lock(ctx)
		},
		block: func(ctx context.Context, c *dlock.Client, name string) (*dlock.Lease, error) {
			return c.Mutex(name).Lock(ctx)
		},
	},
	{
		kind: dlock.KindFair,
		lock: func(ctx context.Context, c *dlock.Client, name string, try bool, opts ...dlock.LockOption) (*dlock.Lease, error) {
			if try {
				return c.FairMutex(name, opts...).TryLock(ctx)
			}
			return c.FairMutex(name, opts...).Lock(ctx)
		},
		block: func(ctx context.Context, c *dlock.Client, name string) (*dlock.Lease, error) {
			return c.FairMutex(name).Lock(ctx)
		},
	},
	{
		kind: dlock.KindRead,
		lock: func(ctx context.Context, c *dlock.Client, name string, try bool, opts ...dlock.LockOption) (*dlock.Lease, error) {
			if try {
				return c.RWMutex(name, opts...).TryRLock(ctx)
			}
			return c.RWMutex(name, opts...).RLock(ctx)
		},
		block: func(ctx context.Context, c *dlock.Client, name string) (*dlock.Lease, error) {
			return c.RWMutex(name).Lock(ctx)
		},
	},
	{
		kind: dlock.KindWrite,
		lock: func(ctx context.Context, c *dlock.Client, name string, try bool, opts ...dlock.LockOption) (*dlock.Lease, error) {
			if try {
				return c.RWMutex(name, opts...).TryLock(ctx)
			}
			return c.RWMutex(name, opts...).Lock(ctx)
		},
		block: func(ctx context.Context, c *dlock.Client, name string) (*dlock.Lease, error) {
			return c.RWMutex(name).RLock(ctx)
		},
	},
	{
		kind: dlock.KindSemaphore,
		lock: func(ctx context.Context, c *dlock.Client, name string, try bool, opts ...dlock.LockOption) (*dlock.Lease, error) {
			if try {
				return c.Semaphore(name, 1, opts...).TryAcquire(ctx, 1)
			}
			return c.Semaphore(name, 1, opts...).Acquire(ctx, 1)
		},
		block: func(ctx context.Context, c *dlock.Client, name string) (*dlock.Lease, error) {
			return c.Semaphore(name, 1).Acquire(ctx, 1)
		},
	},
}

// The workload of TestTelemetryCountsTheWorkload: acquisitions released, TryLocks
// refused, leases lost to a FLUSHALL.
const (
	released = 5
	refused  = 3
	lost     = 4
)

// TestTelemetryCountsTheWorkload runs a known workload on each kind of lock and checks
// that the metrics count it exactly and that there is a span per call and per hold,
// each hold linked to the call that acquired it and carrying its token.
func TestTelemetryCountsTheWorkload(t *testing.T) {
	for _, k := range kinds {
		t.Run(k.kind, func(t *testing.T) {
			srv := dlocktest.Start(t)
			r := newRig(t)
			var ends holdEnds
			client := srv.NewClient(dlock.WithObserver(r.tel.Observer()), ends.observer())
			tokens := runWorkload(t, k, client, srv, &ends)

			m := r.metrics(t)
			lockAttr := kv("dlock.lock.kind", k.kind)
			for _, c := range []struct {
				what      string
				got, want int64
			}{
				{"dlock.acquisitions", m.sum("dlock.acquisitions", lockAttr), released + lost},
				{"dlock.refusals", m.sum("dlock.refusals", lockAttr), refused},
				{"dlock.losses{taken}", m.sum("dlock.losses", lockAttr, kv("dlock.hold.end", "taken")), lost},
				{"dlock.losses", m.sum("dlock.losses", lockAttr), lost},
				{"dlock.leases.held", m.sum("dlock.leases.held", lockAttr), 0},
				{"dlock.waiters", m.sum("dlock.waiters", lockAttr), 0},
				{"dlock.attempts{acquired}", m.sum("dlock.attempts", lockAttr, kv("dlock.verdict", "acquired")), released + lost},
				{"dlock.attempts{held}", m.sum("dlock.attempts", lockAttr, kv("dlock.verdict", "held")), refused},
				{"dlock.wait.duration{acquired} count", int64(m.count("dlock.wait.duration", lockAttr, kv("dlock.wait.outcome", "acquired"))), released + lost},
				{"dlock.wait.duration{refused} count", int64(m.count("dlock.wait.duration", lockAttr, kv("dlock.wait.outcome", "refused"))), refused},
				{"dlock.hold.duration{released} count", int64(m.count("dlock.hold.duration", lockAttr, kv("dlock.hold.end", "released"))), released},
				{"dlock.hold.duration{taken} count", int64(m.count("dlock.hold.duration", lockAttr, kv("dlock.hold.end", "taken"))), lost},
			} {
				if c.got != c.want {
					t.Errorf("%s = %d, want %d", c.what, c.got, c.want)
				}
			}
			checkSpans(t, r.spans.GetSpans(), k.kind, tokens)
		})
	}
}

// acquisition names one acquisition: a fencing token is new at each acquisition of a name.
type acquisition struct {
	name  string
	token uint64
}

// runWorkload makes the acquisitions, refusals and losses on client and returns each
// acquisition, with whether it was lost. It returns once every hold's end has been
// reported (ends).
func runWorkload(t *testing.T, k kind, client *dlock.Client, srv *dlocktest.RedisServer, ends *holdEnds) map[acquisition]bool {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	tokens := map[acquisition]bool{}
	for i := range released {
		lease, err := k.lock(ctx, client, "work", i%2 == 1) // Lock and TryLock alike
		if err != nil {
			t.Fatalf("acquisition %d: %v", i, err)
		}
		tokens[acquisition{lease.Name(), lease.Token()}] = false
		if err := lease.Unlock(ctx); err != nil {
			t.Fatalf("unlock %d: %v", i, err)
		}
	}
	holder, err := k.block(ctx, srv.NewClient(), "work")
	if err != nil {
		t.Fatalf("taking the lock on another client: %v", err)
	}
	for i := range refused {
		if _, err := k.lock(ctx, client, "work", true); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock %d while another client holds the lock: %v, want ErrNotAcquired", i, err)
		}
	}
	_ = holder.Unlock(ctx)

	// Losses last: FLUSHALL also resets the fencing counters.
	var leases []*dlock.Lease
	for i := range lost {
		lease, err := k.lock(ctx, client, fmt.Sprintf("lost-%d", i), false, dlock.TTL(300*time.Millisecond))
		if err != nil {
			t.Fatalf("acquisition %d to lose: %v", i, err)
		}
		tokens[acquisition{lease.Name(), lease.Token()}] = true
		leases = append(leases, lease)
	}
	srv.Flush()
	for _, lease := range leases {
		dlocktest.AssertLost(t, lease, 5*time.Second)
	}
	// The end of a hold is reported after its Done closes, by ValidUntil at the latest;
	// the slack is for a loaded machine's scheduler.
	last := leases[len(leases)-1].ValidUntil()
	if !ends.await(released+lost, time.Until(last)+2*time.Second) {
		t.Fatalf("%d holds' ends reported two seconds after the last lost lease's ValidUntil, want %d", ends.n.Load(), released+lost)
	}
	return tokens
}

// checkSpans checks the spans of the workload: one per call, with its outcome, verdict
// and token; one per hold, linked to its call's span.
func checkSpans(t *testing.T, spans tracetest.SpanStubs, kind string, tokens map[acquisition]bool) {
	t.Helper()
	calls := map[string]tracetest.SpanStub{} // the acquiring calls' spans by span ID
	outcomes := map[string]int{}
	holds := 0
	for _, s := range spans {
		if v, _ := attr(s, "dlock.lock.kind"); v.AsString() != kind {
			t.Errorf("span %q has dlock.lock.kind %q, want %q", s.Name, v.AsString(), kind)
		}
		if s.Parent.IsValid() {
			t.Errorf("span %q has a parent: the workload's ctx carries no span, so it must be a root span", s.Name)
		}
		out, isCall := attr(s, "dlock.wait.outcome")
		if !isCall {
			holds++
			continue
		}
		outcomes[out.AsString()]++
		verdict, _ := attr(s, "dlock.verdict")
		switch out.AsString() {
		case "acquired":
			calls[s.SpanContext.SpanID().String()] = s
			if verdict.AsString() != "acquired" {
				t.Errorf("acquiring call's span has verdict %q, want acquired", verdict.AsString())
			}
		case "refused":
			if verdict.AsString() != "held" {
				t.Errorf("refused call's span has verdict %q, want held", verdict.AsString())
			}
			if s.Status.Code == codes.Error {
				t.Errorf("refused call's span has status Error (%s): a refusal is an answer, not a failure", s.Status.Description)
			}
		}
	}
	if outcomes["acquired"] != released+lost || outcomes["refused"] != refused || len(outcomes) != 2 {
		t.Errorf("call spans by outcome: %v, want %d acquired and %d refused", outcomes, released+lost, refused)
	}
	if holds != released+lost {
		t.Errorf("%d hold spans, want %d", holds, released+lost)
	}
	for _, s := range spans {
		if _, isCall := attr(s, "dlock.wait.outcome"); isCall {
			continue
		}
		checkHoldSpan(t, s, calls, tokens)
	}
}

// checkHoldSpan checks a hold's span: its token is an acquisition's, its end says
// whether it was lost, and its one link is to the span of the call that acquired it.
func checkHoldSpan(t *testing.T, s tracetest.SpanStub, calls map[string]tracetest.SpanStub, tokens map[acquisition]bool) {
	t.Helper()
	tok, _ := attr(s, "dlock.token")
	name, _ := attr(s, "dlock.lock.name")
	token := uint64(tok.AsInt64())
	wasLost, ok := tokens[acquisition{name.AsString(), token}]
	if !ok {
		t.Errorf("hold span %q has name %q and token %d, which no acquisition returned", s.Name, name.AsString(), token)
		return
	}
	end, _ := attr(s, "dlock.hold.end")
	switch {
	case wasLost && (end.AsString() != "taken" || s.Status.Code != codes.Error || !hasReason(s)):
		t.Errorf("hold %q %d, lost to FLUSHALL, has end %q, status %v and reason %v, want taken, Error and a reason", name.AsString(), token, end.AsString(), s.Status.Code, hasReason(s))
	case !wasLost && (end.AsString() != "released" || s.Status.Code == codes.Error):
		t.Errorf("hold %q %d, released, has end %q and status %v, want released and not Error", name.AsString(), token, end.AsString(), s.Status.Code)
	}
	if len(s.Links) != 1 {
		t.Errorf("hold %q %d has %d links, want 1 (to its call's span)", name.AsString(), token, len(s.Links))
		return
	}
	call, ok := calls[s.Links[0].SpanContext.SpanID().String()]
	if !ok {
		t.Errorf("hold %q %d is linked to a span that is no acquiring call's", name.AsString(), token)
		return
	}
	ct, _ := attr(call, "dlock.token")
	cn, _ := attr(call, "dlock.lock.name")
	if ct.AsInt64() != tok.AsInt64() || cn.AsString() != name.AsString() {
		t.Errorf("hold %q %d is linked to the call that acquired %q %d", name.AsString(), token, cn.AsString(), ct.AsInt64())
	}
}

func hasReason(s tracetest.SpanStub) bool {
	v, ok := attr(s, "dlock.hold.reason")
	return ok && v.AsString() != ""
}
