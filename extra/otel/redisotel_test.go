package dlockotel_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/extra/redisotel/v9"
	"github.com/redis/go-redis/v9"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
)

// TestRedisotelSeesTheScripts instruments the go-redis client given to dlock.New with
// redisotel: the scripts of an uncontended Lock and of its Unlock appear as spans of
// go-redis's, children of the span in the ctx given to each (the round trip that carried
// them carried only that caller's call). dlock's own call span is made once the call has
// ended, so it cannot be their parent: they are its siblings.
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

	// A TTL long enough that no renewal (a round trip of no caller's) runs meanwhile.
	tracer := r.tp.Tracer("test")
	lockCtx, locker := tracer.Start(context.Background(), "locker")
	lease, err := client.Mutex("traced", dlock.TTL(time.Minute)).Lock(lockCtx)
	if err != nil {
		t.Fatal(err)
	}
	locker.End()
	unlockCtx, unlocker := tracer.Start(context.Background(), "unlocker")
	if err := lease.Unlock(unlockCtx); err != nil {
		t.Fatal(err)
	}
	unlocker.End()

	callers := map[trace.SpanID]string{locker.SpanContext().SpanID(): "locker", unlocker.SpanContext().SpanID(): "unlocker"}
	children := map[string]int{}
	dlockSpans := 0
	for _, s := range r.spans.GetSpans() {
		if strings.HasPrefix(s.Name, "dlock.") {
			// The call's span and the hold's: children of the Lock caller's, whose ctx
			// the observer's events carry.
			dlockSpans++
			if s.Parent.SpanID() != locker.SpanContext().SpanID() {
				t.Errorf("span %q has parent %v, want the Lock caller's span %v", s.Name, s.Parent.SpanID(), locker.SpanContext().SpanID())
			}
		}
		if !strings.Contains(strings.ToLower(s.Name), "eval") { // eval, evalsha, or a pipeline of them
			continue
		}
		parent, ok := callers[s.Parent.SpanID()]
		t.Logf("redisotel span %q, parent %v (%s)", s.Name, s.Parent.SpanID(), parent)
		if !ok || s.SpanContext.TraceID() != s.Parent.TraceID() {
			t.Errorf("redisotel span %q has parent %v, want the span of the ctx given to Lock or Unlock", s.Name, s.Parent.SpanID())
		}
		children[parent]++
	}
	if dlockSpans != 2 {
		t.Errorf("%d dlock spans, want the Lock call's and the hold's", dlockSpans)
	}
	for _, c := range []string{"locker", "unlocker"} {
		if children[c] == 0 {
			t.Errorf("no redisotel span of a script is a child of the %s's span; spans: %v", c, spanNames(r.spans.GetSpans()))
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
