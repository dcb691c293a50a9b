package dlockotel_test

import (
	"context"
	"fmt"
	"strings"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
	dlockotel "github.com/seed51c676c8/dlock/extra/otel"
)

func Example() {
	// Your providers; here in memory, to print what they got.
	spans := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer tp.Shutdown(context.Background())
	defer mp.Shutdown(context.Background())

	tel, err := dlockotel.New(dlockotel.WithTracerProvider(tp), dlockotel.WithMeterProvider(mp))
	if err != nil {
		fmt.Println(err)
		return
	}
	srv := dlocktest.Start(t) // your Redis: dlock.New(rdb, dlock.WithObserver(tel.Observer()))
	// WithOwner names the spans' dlock.owner; by default it is "host:pid".
	client := srv.NewClient(dlock.WithOwner("billing-1"), dlock.WithObserver(tel.Observer()))
	ctx := context.Background()

	lease, err := client.Mutex("report").Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	_ = lease.Unlock(ctx)

	for _, s := range spans.GetSpans() {
		fmt.Printf("span %q:", s.Name)
		for _, kv := range s.Attributes {
			if kv.Key != "dlock.wait.duration" { // varies from run to run
				fmt.Printf(" %s=%s", kv.Key, kv.Value.String())
			}
		}
		fmt.Printf(" links=%d\n", len(s.Links))
	}
	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "dlock.acquisitions" {
				for _, dp := range sum.DataPoints {
					fmt.Println("dlock.acquisitions:", dp.Value)
				}
			}
		}
	}
	// Output:
	// span "dlock.Lock mutex": dlock.lock.name=report dlock.lock.kind=mutex dlock.attempts=1 dlock.wait.outcome=acquired dlock.owner=billing-1 dlock.verdict=acquired dlock.token=1 links=0
	// span "dlock.hold mutex": dlock.lock.name=report dlock.lock.kind=mutex dlock.token=1 dlock.hold.end=released dlock.owner=billing-1 links=1
	// dlock.acquisitions: 1
}

// Lock names that identify an object, like "order:42", would each make time series of
// their own: a mapper folds them into their kind of object.
func ExampleWithNameMapper() {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	defer mp.Shutdown(context.Background())
	tel, err := dlockotel.New(dlockotel.WithMeterProvider(mp), dlockotel.WithNameMapper(func(name string) string {
		prefix, _, _ := strings.Cut(name, ":")
		return prefix
	}))
	if err != nil {
		fmt.Println(err)
		return
	}
	client := dlocktest.Start(t).NewClient(dlock.WithObserver(tel.Observer()))
	ctx := context.Background()
	for _, name := range []string{"order:41", "order:42", "order:43"} {
		lease, err := client.Mutex(name).Lock(ctx)
		if err != nil {
			fmt.Println(err)
			return
		}
		_ = lease.Unlock(ctx)
	}

	var rm metricdata.ResourceMetrics
	_ = reader.Collect(ctx, &rm)
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sum, ok := m.Data.(metricdata.Sum[int64]); ok && m.Name == "dlock.acquisitions" {
				for _, dp := range sum.DataPoints {
					name, _ := dp.Attributes.Value("dlock.lock.name")
					fmt.Println(name.AsString(), dp.Value)
				}
			}
		}
	}
	// Output: order 3
}

func ExampleWithMaxNames() {
	_, err := dlockotel.New(dlockotel.WithMaxNames(-1))
	fmt.Println(err)
	// Output: dlockotel: WithMaxNames(-1): the bound must be 0 (the default, 100) or more
}
