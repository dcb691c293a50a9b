package dlockprom_test

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
	dlockprom "github.com/seed51c676c8/dlock/extra/prometheus"
)

// newCollector returns a Collector made with opts and registered with a registry of its own.
func newCollector(t *testing.T, opts ...dlockprom.Option) (*dlockprom.Collector, *prometheus.Registry) {
	t.Helper()
	c, err := dlockprom.New(opts...)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	reg := prometheus.NewPedanticRegistry()
	if err := reg.Register(c); err != nil {
		t.Fatalf("Register: %v", err)
	}
	return c, reg
}

// families gathers reg, by metric name.
func families(t testing.TB, reg prometheus.Gatherer) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatalf("Gather: %v", err)
	}
	byName := make(map[string]*dto.MetricFamily, len(mfs))
	for _, mf := range mfs {
		byName[mf.GetName()] = mf
	}
	return byName
}

// value is the sum, over the series of metric whose labels include want, of their values:
// a counter's or gauge's value, a histogram's sample count.
func value(t testing.TB, reg prometheus.Gatherer, metric string, want map[string]string) float64 {
	t.Helper()
	var sum float64
	for _, m := range families(t, reg)[metric].GetMetric() {
		if !hasLabels(m, want) {
			continue
		}
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		}
	}
	return sum
}

func hasLabels(m *dto.Metric, want map[string]string) bool {
	n := 0
	for _, lp := range m.GetLabel() {
		if v, ok := want[lp.GetName()]; ok {
			if v != lp.GetValue() {
				return false
			}
			n++
		}
	}
	return n == len(want)
}

// labelValues returns the distinct values of label among the series of metric.
func labelValues(t testing.TB, reg prometheus.Gatherer, metric, label string) map[string]bool {
	t.Helper()
	values := map[string]bool{}
	for _, m := range families(t, reg)[metric].GetMetric() {
		for _, lp := range m.GetLabel() {
			if lp.GetName() == label {
				values[lp.GetValue()] = true
			}
		}
	}
	return values
}

// lock is a lock's name label and kind, for the want maps of value.
func lock(name, kind string) map[string]string {
	return map[string]string{"name": name, "kind": kind}
}

// with returns labels plus key=v.
func with(labels map[string]string, key, v string) map[string]string {
	out := map[string]string{key: v}
	for k, x := range labels {
		out[k] = x
	}
	return out
}

// expect is one metric's expected value, as value reads it.
type expect struct {
	metric string
	labels map[string]string
	want   float64
}

// checkAll reports every expectation that reg does not meet.
func checkAll(t *testing.T, reg prometheus.Gatherer, exps []expect) {
	t.Helper()
	for _, e := range exps {
		if got := value(t, reg, e.metric, e.labels); got != e.want {
			t.Errorf("%s%v = %v, want %v", e.metric, e.labels, got, e.want)
		}
	}
}

// eventually waits up to within for every expectation to be met (an event sent after the
// lease ended, say), then checks them all.
func eventually(t *testing.T, reg prometheus.Gatherer, within time.Duration, exps []expect) {
	t.Helper()
	deadline := time.Now().Add(within)
	for time.Now().Before(deadline) {
		met := true
		for _, e := range exps {
			if value(t, reg, e.metric, e.labels) != e.want {
				met = false
				break
			}
		}
		if met {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	checkAll(t, reg, exps)
}

// patientClient returns a dlock Client, made with opts, on srv through a go-redis client of
// its own with timeouts of 10s instead of dlocktest's 1s: for workloads of thousands of
// round trips, which a loaded machine can stall for over a second. Both are closed when
// the test ends.
func patientClient(t *testing.T, srv *dlocktest.RedisServer, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	rdb := redis.NewClient(&redis.Options{
		Addr: srv.Addr, DialTimeout: 10 * time.Second, ReadTimeout: 10 * time.Second, WriteTimeout: 10 * time.Second,
	})
	client := dlock.New(rdb, opts...)
	t.Cleanup(func() {
		_ = client.Close()
		_ = rdb.Close()
	})
	return client
}

// observed returns the dlock option that feeds c.
func observed(c *dlockprom.Collector) dlock.Option { return dlock.WithObserver(c.Observer()) }
