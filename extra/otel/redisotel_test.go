package otel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
)

// TestRedisotelSeesTheScripts instruments the go-redis client given to dlock.New with
// redisotel: every script dlock runs appears as a span of go-redis's. Those spans are
// not children of the caller's span: dlock sends a call through a lane of its own
// (internal/batch), whose round trip has a context of its own that carries no values,
// so the caller's span does not reach go-redis's hooks. If that changes, this test fails,
// and the documentation that says so must change with it.
func TestRedisotelSeesTheScripts(t *testing.T) {
	srv := dlocktest.Start(t)
	r := newRig(t)
	rdb := redis.NewClient(&redis.Options{Addr: srv.Client().Options().Addr})
	defer rdb.Close()
	if err := redisotel.InstrumentTracing(rdb, redisotel.WithTracerProvider(r.tp)); err != nil {
		t.Fatalf("redisotel.InstrumentTracing: %v", err)
	}
	client := dlock.New(rdb, dlock.WithObserver(r.tel.Observer()))
	defer client.Close()

	ctx, caller := r.tp.Tracer("test").Start(context.Background(), "caller")
	lease, err := client.Mutex("traced", dlock.TTL(time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	caller.End()

	var scripts []tracetest.SpanStub
	dlockSpans := 0
	for _, s := range r.spans.GetSpans() {
		if strings.HasPrefix(s.Name, "dlock.") {
			// The call's span and the hold's: children of the caller's, whose ctx the
			// observer's events carry.
			dlockSpans++
			if s.Parent.SpanID() != caller.SpanContext().SpanID() {
				t.Errorf("span %q has parent %v, want the caller's span %v", s.Name, s.Parent.SpanID(), caller.SpanContext().SpanID())
			}
		}
		name := strings.ToLower(s.Name)
		if strings.Contains(name, "eval") { // eval, evalsha, or a pipeline of them
			scripts = append(scripts, s)
		}
	}
	if dlockSpans != 2 {
		t.Errorf("%d dlock spans, want the Lock call's and the hold's", dlockSpans)
	}
	if len(scripts) < 2 {
		t.Fatalf("%d redisotel spans of scripts, want one for the Lock's and one for the Unlock's at least; spans: %v", len(scripts), spanNames(r.spans.GetSpans()))
	}
	for _, s := range scripts {
		t.Logf("redisotel span %q, parent %v, trace %v (caller's trace %v)", s.Name, s.Parent.SpanID(), s.SpanContext.TraceID(), caller.SpanContext().TraceID())
		if s.Parent.IsValid() {
			t.Errorf("redisotel span %q has a parent (%v): the caller's context now reaches go-redis; document it, and make this test check that the parent is the caller's span", s.Name, s.Parent.SpanID())
		}
	}
}

func spanNames(spans tracetest.SpanStubs) []string {
	var names []string
	for _, s := range spans {
		names = append(names, s.Name)
	}
	return names
}
