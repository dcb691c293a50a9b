package main

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// lockStats is what the metrics say of one lock.
type lockStats struct {
	acquired, refused, gaveUp float64
	waits, holds              *dto.Histogram
}

// report prints, per lock, what the registry's metrics say: the same numbers Prometheus
// would scrape from /metrics.
func report(stdout io.Writer, registry prometheus.Gatherer) error {
	mfs, err := registry.Gather()
	if err != nil {
		return err
	}
	stats := map[string]*lockStats{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			name := label(m, "name")
			if name == "" {
				continue // dlock_node_silences_total
			}
			s := stats[name]
			if s == nil {
				s = &lockStats{}
				stats[name] = s
			}
			switch mf.GetName() {
			case "dlock_acquisitions_total":
				s.acquired += m.GetCounter().GetValue()
			case "dlock_refusals_total":
				s.refused += m.GetCounter().GetValue()
			case "dlock_give_ups_total":
				s.gaveUp += m.GetCounter().GetValue()
			case "dlock_wait_seconds":
				s.waits = m.GetHistogram()
			case "dlock_hold_seconds":
				s.holds = m.GetHistogram()
			}
		}
	}
	names := slices.Sorted(maps.Keys(stats))
	fmt.Fprintf(stdout, "\n%-16s %9s %8s %9s %10s %10s\n", "lock", "acquired", "refused", "gave up", "mean wait", "mean hold")
	for _, n := range names {
		s := stats[n]
		fmt.Fprintf(stdout, "%-16s %9.0f %8.0f %9.0f %10v %10v\n", n, s.acquired, s.refused, s.gaveUp, mean(s.waits), mean(s.holds))
	}
	return nil
}

// label returns the value of m's label name, or "".
func label(m *dto.Metric, name string) string {
	for _, lp := range m.GetLabel() {
		if lp.GetName() == name {
			return lp.GetValue()
		}
	}
	return ""
}

// mean is a histogram's mean, rounded for the table.
func mean(h *dto.Histogram) time.Duration {
	if h.GetSampleCount() == 0 {
		return 0
	}
	return time.Duration(h.GetSampleSum() / float64(h.GetSampleCount()) * float64(time.Second)).Round(100 * time.Microsecond)
}
