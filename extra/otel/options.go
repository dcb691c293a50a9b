package dlockotel

import (
	"fmt"

	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// DefaultMaxNames is how many distinct lock names the metrics carry when WithMaxNames is
// not given: 100.
const DefaultMaxNames = 100

// Other is the lock name that metrics carry for every name beyond the bound.
const Other = "other"

// An Option configures New.
type Option func(*config)

type config struct {
	tp       trace.TracerProvider // nil: the global one, looked up by New
	mp       metric.MeterProvider // nil: the global one, looked up by New
	mapper   func(string) string  // nil: the name itself
	maxNames int                  // 0: DefaultMaxNames
	err      error                // the first invalid option
}

// WithTracerProvider sets where the spans go. The default (also for nil) is the global
// TracerProvider, as otel.GetTracerProvider returns it when New is called.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *config) { c.tp = tp }
}

// WithMeterProvider sets where the metrics go. The default (also for nil) is the global
// MeterProvider, as otel.GetMeterProvider returns it when New is called.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *config) { c.mp = mp }
}

// WithNameMapper sets how a lock name becomes the dlock.lock.name attribute of metrics,
// such as "order:42" to "order", so that names that identify an object (unbounded) do
// not each make a time series. f is called for every event, from any goroutine, and must
// be fast and safe for concurrent use. Whatever f returns is still subject to
// WithMaxNames. Spans always carry the lock's own name. The default (also for nil) keeps
// names as they are.
func WithNameMapper(f func(name string) string) Option {
	return func(c *config) { c.mapper = f }
}

// WithMaxNames bounds the distinct dlock.lock.name values of metrics: the first n names
// seen (after WithNameMapper) are kept, and every later one is counted under Other. 0
// means DefaultMaxNames; a negative n makes New fail.
func WithMaxNames(n int) Option {
	return func(c *config) {
		if n < 0 {
			c.setErr(fmt.Errorf("dlockotel: WithMaxNames(%d): the bound must be 0 (the default, %d) or more", n, DefaultMaxNames))
			return
		}
		c.maxNames = n
	}
}

func (c *config) setErr(err error) {
	if c.err == nil {
		c.err = err
	}
}
