package dlockprom_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
	dlockprom "github.com/seed51c676c8/dlock/extra/prometheus"
)

func ExampleCollector() {
	metrics, err := dlockprom.New()
	if err != nil {
		panic(err)
	}
	registry := prometheus.NewRegistry() // or prometheus.DefaultRegisterer
	registry.MustRegister(metrics)
	// In a program: client := dlock.New(rdb, dlock.WithObserver(metrics.Observer()))
	client := dlocktest.Server(t, dlock.WithObserver(metrics.Observer()))

	ctx := context.Background()
	for range 3 {
		lease, err := client.Mutex("nightly-report").Lock(ctx)
		if err != nil {
			panic(err)
		}
		lease.Unlock(ctx)
	}
	printSeries(registry, "dlock_acquisitions_total", "dlock_hold_seconds", "dlock_held_leases")
	// Output:
	// dlock_acquisitions_total{kind="mutex",name="nightly-report"} 3
	// dlock_hold_seconds{kind="mutex",name="nightly-report"} 3 samples
	// dlock_held_leases{kind="mutex",name="nightly-report"} 0
}

func ExampleWithNameLabel() {
	// Lock names like "order:42" are unbounded; label them by what comes before the ':'.
	metrics, err := dlockprom.New(dlockprom.WithNameLabel(func(name string) string {
		kind, _, _ := strings.Cut(name, ":")
		return kind
	}))
	if err != nil {
		panic(err)
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics)
	client := dlocktest.Server(t, dlock.WithObserver(metrics.Observer()))

	ctx := context.Background()
	for _, name := range []string{"order:41", "order:42", "order:43", "invoice:7"} {
		lease, err := client.Mutex(name).Lock(ctx)
		if err != nil {
			panic(err)
		}
		lease.Unlock(ctx)
	}
	printSeries(registry, "dlock_acquisitions_total")
	// Output:
	// dlock_acquisitions_total{kind="mutex",name="invoice"} 1
	// dlock_acquisitions_total{kind="mutex",name="order"} 3
}

func ExampleWithMaxNames() {
	metrics, err := dlockprom.New(dlockprom.WithMaxNames(2))
	if err != nil {
		panic(err)
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics)
	client := dlocktest.Server(t, dlock.WithObserver(metrics.Observer()))

	ctx := context.Background()
	for _, name := range []string{"a", "b", "c", "d", "a"} {
		lease, err := client.Mutex(name).Lock(ctx)
		if err != nil {
			panic(err)
		}
		lease.Unlock(ctx)
	}
	printSeries(registry, "dlock_acquisitions_total")
	// Output:
	// dlock_acquisitions_total{kind="mutex",name="a"} 2
	// dlock_acquisitions_total{kind="mutex",name="b"} 1
	// dlock_acquisitions_total{kind="mutex",name="other"} 2
}

func ExampleWithOwnerLabel() {
	metrics, err := dlockprom.New(dlockprom.WithOwnerLabel())
	if err != nil {
		panic(err)
	}
	registry := prometheus.NewRegistry()
	registry.MustRegister(metrics)
	srv := dlocktest.Start(t)
	// Two programs' Clients, named; by default each is named "host:pid".
	for _, owner := range []string{"billing-1", "billing-2"} {
		client := srv.NewClient(dlock.WithOwner(owner), dlock.WithObserver(metrics.Observer()))
		lease, err := client.Mutex("nightly-report").Lock(context.Background())
		if err != nil {
			panic(err)
		}
		lease.Unlock(context.Background())
	}
	printSeries(registry, "dlock_acquisitions_total")
	// Output:
	// dlock_acquisitions_total{kind="mutex",name="nightly-report",owner="billing-1"} 1
	// dlock_acquisitions_total{kind="mutex",name="nightly-report",owner="billing-2"} 1
}

// printSeries prints the series of the named metrics that g gathers, in the order given,
// each series with its labels, sorted, and its value (a histogram's sample count).
func printSeries(g prometheus.Gatherer, names ...string) {
	mfs, err := g.Gather()
	if err != nil {
		panic(err)
	}
	for _, name := range names {
		for _, mf := range mfs {
			if mf.GetName() != name {
				continue
			}
			for _, m := range mf.GetMetric() {
				var labels []string
				for _, lp := range m.GetLabel() {
					labels = append(labels, fmt.Sprintf("%s=%q", lp.GetName(), lp.GetValue()))
				}
				series := fmt.Sprintf("%s{%s}", name, strings.Join(labels, ","))
				switch {
				case m.Histogram != nil:
					fmt.Printf("%s %d samples\n", series, m.Histogram.GetSampleCount())
				case m.Counter != nil:
					fmt.Printf("%s %v\n", series, m.Counter.GetValue())
				case m.Gauge != nil:
					fmt.Printf("%s %v\n", series, m.Gauge.GetValue())
				}
			}
		}
	}
}
