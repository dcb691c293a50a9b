package dlockprom

import (
	"errors"
	"fmt"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
)

// ErrBadBuckets is the error New returns for histogram buckets that do not increase.
var ErrBadBuckets = errors.New("dlockprom: histogram bucket bounds must be strictly increasing")

// A Collector turns a dlock Client's events into Prometheus metrics. Register it with a
// prometheus.Registerer and give its Observer to dlock.WithObserver:
//
//	metrics, err := dlockprom.New()
//	...
//	registry.MustRegister(metrics)
//	client := dlock.New(rdb, dlock.WithObserver(metrics.Observer()))
//
// It exports, with the labels name and kind, and owner with WithOwnerLabel (the package
// documentation says what each counts):
// dlock_wait_seconds and dlock_hold_seconds (histograms), dlock_acquisitions_total,
// dlock_refusals_total, dlock_give_ups_total{reason}, dlock_attempts_total{verdict},
// dlock_losses_total{cause}, dlock_renewal_failures_total,
// dlock_renewal_recoveries_total, dlock_handoffs_total{local} (counters),
// dlock_held_leases and dlock_waiters (gauges); and dlock_node_silences_total{addr}.
//
// A Collector is safe for concurrent use, and may observe several Clients: their events
// add up.
type Collector struct {
	m      metrics
	labels *labels
}

var _ prometheus.Collector = (*Collector)(nil)

// New returns a Collector configured by opts. Its error, ErrBadBuckets wrapped, says which
// option gave buckets that do not increase; no Collector is made then.
func New(opts ...Option) (*Collector, error) {
	cfg := newConfig(opts)
	if err := checkBuckets("wait", cfg.waitBuckets); err != nil {
		return nil, err
	}
	if err := checkBuckets("hold", cfg.holdBuckets); err != nil {
		return nil, err
	}
	c := &Collector{m: newMetrics(cfg)}
	c.labels = newLabels(cfg, &c.m)
	return c, nil
}

func checkBuckets(which string, bounds []float64) error {
	for i := 1; i < len(bounds); i++ {
		if !(bounds[i] > bounds[i-1]) {
			return fmt.Errorf("%w: the %s buckets %v", ErrBadBuckets, which, slices.Clone(bounds))
		}
	}
	return nil
}

// Describe sends the descriptors of every metric the Collector exports.
func (c *Collector) Describe(ch chan<- *prometheus.Desc) {
	for _, v := range c.m.collectors() {
		v.Describe(ch)
	}
}

// Collect sends the current value of every series.
func (c *Collector) Collect(ch chan<- prometheus.Metric) {
	for _, v := range c.m.collectors() {
		v.Collect(ch)
	}
}
