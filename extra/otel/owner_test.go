package dlockotel_test

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
)

// TestOwnerOnSpansNotMetrics: the call's and the hold's spans carry dlock.owner, the
// Client's owner name (the default, host:pid, or WithOwner's), none for WithOwner(""); no
// metric's data point carries it.
func TestOwnerOnSpansNotMetrics(t *testing.T) {
	srv := dlocktest.Start(t)
	cases := []struct {
		name  string
		opts  []dlock.Option
		match func(string) bool // the attribute's value; nil: absent
	}{
		{"default", nil, func(v string) bool { return strings.HasSuffix(v, fmt.Sprintf(":%d", os.Getpid())) }},
		{"named", []dlock.Option{dlock.WithOwner("web-1")}, func(v string) bool { return v == "web-1" }},
		{"none", []dlock.Option{dlock.WithOwner("")}, nil},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := newRig(t)
			var ends holdEnds
			client := srv.NewClient(append(c.opts, dlock.WithObserver(r.tel.Observer()), ends.observer())...)
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			lease, err := client.Mutex("owned").Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if err := lease.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			if !ends.await(1, 10*time.Second) {
				t.Fatal("the hold did not end")
			}
			spans := r.spans.GetSpans()
			if len(spans) != 2 {
				t.Fatalf("%d spans, want the call's and the hold's", len(spans))
			}
			for _, s := range spans {
				v, ok := attr(s, "dlock.owner")
				switch {
				case c.match == nil && ok:
					t.Errorf("span %q: dlock.owner %q, want none", s.Name, v.AsString())
				case c.match != nil && (!ok || !c.match(v.AsString())):
					t.Errorf("span %q: dlock.owner %q (set: %v)", s.Name, v.AsString(), ok)
				}
			}
			for name, md := range r.metrics(t) {
				for _, set := range attributeSets(md) {
					if _, ok := set.Value("dlock.owner"); ok {
						t.Errorf("metric %s carries dlock.owner", name)
					}
				}
			}
		})
	}
}
