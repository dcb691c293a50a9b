package main

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

func TestBenchJSON(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	r := runBin(t, nil, "bench", "--redis", serverURL(srv), "--json", "--duration", "300ms", "--goroutines", "4", "--processes", "2", "--hold", "1ms")
	expect(t, r, 0)
	var res benchResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("not JSON: %v\n%v", err, r)
	}
	c := res.Contended
	switch {
	case res.Embedded || res.Kind != "mutex" || res.Goroutines != 4 || res.Processes != 2 || res.HoldMS != 1 || res.DurationMS != 300:
		t.Errorf("the settings are not echoed: %+v", res)
	case res.Uncontended.Ops < 1 || res.Uncontended.OpsPerSec <= 0:
		t.Errorf("no uncontended operations: %+v", res.Uncontended)
	case c.Handoffs < 1 || c.HandoffsPerSec <= 0:
		t.Errorf("no hand-offs: %+v", c)
	case !(0 <= c.WaitP50MS && c.WaitP50MS <= c.WaitP99MS && c.WaitP99MS <= c.WaitMaxMS):
		t.Errorf("wait percentiles out of order: %+v", c)
	case !(c.Utilisation > 0 && c.Utilisation < 1.5):
		t.Errorf("utilisation %v", c.Utilisation)
	case res.Errors != 0:
		t.Errorf("%d errors: %s", res.Errors, res.FirstErr)
	}
	total := 0
	for i, b := range c.Histogram {
		total += b.Count
		if i > 0 && b.LeMS <= c.Histogram[i-1].LeMS {
			t.Errorf("histogram buckets out of order: %+v", c.Histogram)
		}
	}
	if int64(total) != c.Handoffs {
		t.Errorf("the histogram counts %d waits, for %d hand-offs", total, c.Handoffs)
	}
	if last := c.Histogram[len(c.Histogram)-1]; last.LeMS < c.WaitMaxMS {
		t.Errorf("the last bucket (<= %vms) is below the max wait %vms", last.LeMS, c.WaitMaxMS)
	}
}

func TestBenchEmbeddedText(t *testing.T) {
	t.Parallel()
	r := runBin(t, nil, "bench", "--duration", "200ms", "--goroutines", "3", "--processes", "1")
	expect(t, r, 0, "not representative", "uncontended", "hand-offs", "p50", "p99", "utilisation", "<= ")
	if strings.Contains(r.stdout, "\r") {
		t.Errorf("progress characters in output that is not a terminal:\n%q", r.stdout)
	}
}

func TestBenchFair(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	r := runBin(t, nil, "bench", "--redis", serverURL(srv), "--kind", "fair", "--json", "--duration", "300ms", "--goroutines", "3", "--processes", "1")
	expect(t, r, 0)
	var res benchResult
	if err := json.Unmarshal([]byte(r.stdout), &res); err != nil {
		t.Fatalf("not JSON: %v\n%v", err, r)
	}
	if res.Kind != "fair" || res.Contended.Handoffs < 1 || res.Uncontended.Ops < 1 || res.Errors != 0 {
		t.Fatalf("fair bench: %+v", res)
	}
}
