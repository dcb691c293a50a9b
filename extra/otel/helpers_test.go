package dlockotel_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seed51c676c8/dlock"
	dlockotel "github.com/seed51c676c8/dlock/extra/otel"
)

// rig is a Telemetry whose spans and metrics are kept in memory for the test to read.
type rig struct {
	tel    *dlockotel.Telemetry
	spans  *tracetest.InMemoryExporter
	reader *sdkmetric.ManualReader
	tp     *sdktrace.TracerProvider
}

func newRig(tb testing.TB, opts ...dlockotel.Option) *rig {
	tb.Helper()
	r := &rig{spans: tracetest.NewInMemoryExporter(), reader: sdkmetric.NewManualReader()}
	r.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(r.spans))
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(r.reader))
	tb.Cleanup(func() {
		_ = r.tp.Shutdown(context.Background())
		_ = mp.Shutdown(context.Background())
	})
	tel, err := dlockotel.New(append([]dlockotel.Option{
		dlockotel.WithTracerProvider(r.tp), dlockotel.WithMeterProvider(mp),
	}, opts...)...)
	if err != nil {
		tb.Fatalf("New: %v", err)
	}
	r.tel = tel
	return r
}

// metrics collects what the meter has now.
func (r *rig) metrics(tb testing.TB) metrics {
	tb.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.reader.Collect(context.Background(), &rm); err != nil {
		tb.Fatalf("collecting the metrics: %v", err)
	}
	m := metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, md := range sm.Metrics {
			m[md.Name] = md
		}
	}
	return m
}

// metrics are the collected metrics by name.
type metrics map[string]metricdata.Metrics

// sum is the value of an int64 counter (or up-down counter) summed over the data points
// that carry every attribute in match; 0 if there is none.
func (m metrics) sum(name string, match ...attribute.KeyValue) int64 {
	var n int64
	if s, ok := m[name].Data.(metricdata.Sum[int64]); ok {
		for _, dp := range s.DataPoints {
			if has(dp.Attributes, match) {
				n += dp.Value
			}
		}
	}
	return n
}

// count is the number of values a histogram recorded, over the data points that carry
// every attribute in match.
func (m metrics) count(name string, match ...attribute.KeyValue) uint64 {
	var n uint64
	if h, ok := m[name].Data.(metricdata.Histogram[float64]); ok {
		for _, dp := range h.DataPoints {
			if has(dp.Attributes, match) {
				n += dp.Count
			}
		}
	}
	return n
}

// names are the distinct dlock.lock.name values of a metric's data points.
func (m metrics) names(name string) map[string]bool {
	seen := map[string]bool{}
	for _, set := range attributeSets(m[name]) {
		if v, ok := set.Value("dlock.lock.name"); ok {
			seen[v.AsString()] = true
		}
	}
	return seen
}

// attributeSets returns the attribute sets of a metric's data points.
func attributeSets(md metricdata.Metrics) []attribute.Set {
	var sets []attribute.Set
	switch d := md.Data.(type) {
	case metricdata.Sum[int64]:
		for _, dp := range d.DataPoints {
			sets = append(sets, dp.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, dp := range d.DataPoints {
			sets = append(sets, dp.Attributes)
		}
	}
	return sets
}

func has(set attribute.Set, match []attribute.KeyValue) bool {
	for _, kv := range match {
		if v, ok := set.Value(kv.Key); !ok || v.Type() != kv.Value.Type() || v.String() != kv.Value.String() {
			return false
		}
	}
	return true
}

// attr returns a span's attribute named key.
func attr(s tracetest.SpanStub, key attribute.Key) (attribute.Value, bool) {
	for _, kv := range s.Attributes {
		if kv.Key == key {
			return kv.Value, true
		}
	}
	return attribute.Value{}, false
}

// eventually polls cond until it holds or within has passed; it reports whether it held.
func eventually(within time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(within)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func kv(key, value string) attribute.KeyValue { return attribute.String(key, value) }

// holdEnds counts the HoldEnded events of a Client. Given to it after the Telemetry's
// observer, it hears of each end once the Telemetry has recorded it: observers are called
// in the order they were given.
type holdEnds struct{ n atomic.Int64 }

func (h *holdEnds) observer() dlock.Option {
	return dlock.WithObserver(dlock.Observer{HoldEnded: func(dlock.HoldEnd) { h.n.Add(1) }})
}

// await waits until n holds have ended, up to within; it reports whether they had.
func (h *holdEnds) await(n int64, within time.Duration) bool {
	return eventually(within, func() bool { return h.n.Load() >= n })
}
