package dlockotel_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
	dlockotel "github.com/seed51c676c8/dlock/extra/otel"
)

// TestLockNamesStayWithinTheBound takes 10,000 locks of distinct names and checks that
// no metric carries more than the bound's names plus "other", and that nothing is lost
// to the bound: every acquisition is counted, under its name or under "other". It does
// so for the default bound, a bound of its own, and a name mapper that folds names that
// identify an object into their prefix.
func TestLockNamesStayWithinTheBound(t *testing.T) {
	const locks = 10_000
	cases := []struct {
		name      string
		opts      []dlockotel.Option
		wantNames int // distinct dlock.lock.name values
	}{
		{"default bound", nil, dlockotel.DefaultMaxNames + 1},
		{"bound of 10", []dlockotel.Option{dlockotel.WithMaxNames(10)}, 11},
		{"mapper", []dlockotel.Option{dlockotel.WithNameMapper(func(name string) string {
			prefix, _, _ := strings.Cut(name, ":")
			return prefix
		})}, 4},
	}
	srv := dlocktest.Start(t)
	rigs := make([]*rig, len(cases))
	var opts []dlock.Option
	for i, c := range cases {
		rigs[i] = newRig(t, c.opts...)
		opts = append(opts, dlock.WithObserver(rigs[i].tel.Observer()))
	}
	for _, r := range rigs {
		_ = r.tp.Shutdown(context.Background()) // spans are not what this test counts
	}
	client := srv.NewClient(opts...)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for i := range locks {
		name := fmt.Sprintf("%s:%d", []string{"order", "user", "cart", "stock"}[i%4], i)
		lease, err := client.Mutex(name).TryLock(ctx)
		if err != nil {
			t.Fatalf("TryLock %s: %v", name, err)
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatalf("Unlock %s: %v", name, err)
		}
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			m := rigs[i].metrics(t)
			for _, metric := range []string{"dlock.acquisitions", "dlock.attempts", "dlock.wait.duration", "dlock.hold.duration", "dlock.waiters", "dlock.leases.held"} {
				if got := len(m.names(metric)); got != c.wantNames {
					t.Errorf("%s carries %d names, want %d", metric, got, c.wantNames)
				}
			}
			if got := m.sum("dlock.acquisitions"); got != locks {
				t.Errorf("dlock.acquisitions = %d over every name, want %d", got, locks)
			}
		})
	}
}
