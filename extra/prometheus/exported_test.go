package dlockprom_test

import (
	"context"
	"errors"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
)

// exportedNames returns the names of the series the Collector exports, as PromQL selects
// them, gathered from a registry after a small workload: a histogram's _bucket, _sum and
// _count, and every other metric's own name.
func exportedNames(t *testing.T) map[string]bool {
	t.Helper()
	c, reg := newCollector(t)
	client := dlocktest.Server(t, observed(c))
	ctx := context.Background()
	lease, err := client.Mutex("a").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := client.Mutex("a").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of a held lock: %v, want ErrNotAcquired", err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// A silent node takes a quorum with a node that hangs; the event is what matters here.
	c.Observer().NodeSilent(dlock.NodeSilence{Addr: "127.0.0.1:1"})

	names := map[string]bool{}
	for name, mf := range families(t, reg) {
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			names[name+"_bucket"], names[name+"_sum"], names[name+"_count"] = true, true, true
		} else {
			names[name] = true
		}
	}
	if len(names) < 10 {
		t.Fatalf("the Collector exported only %v after a workload", names)
	}
	return names
}
