package otel_test

import (
	"context"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
	dlockotel "github.com/seed51c676c8/dlock/extra/otel"
)

// go test -run '^$' -bench LockUnlock -benchmem ./extra/otel
//
// BenchmarkLockUnlock is an uncontended Lock+Unlock on one server, in the same run: with
// no observer; with an Observer of no functions (dlock's own cost); with the Telemetry on OpenTelemetry's global providers (no SDK installed:
// every span and measurement is a no-op); with metrics on the SDK (a ManualReader) and
// no tracing; and with both on the SDK, every span sampled and exported to a no-op
// exporter.
func BenchmarkLockUnlock(b *testing.B) {
	srv := dlocktest.Start(b)
	for _, c := range []struct {
		name string
		opts func(b *testing.B) []dlock.Option
	}{
		{"none", func(*testing.B) []dlock.Option { return nil }},
		{"empty-observer", func(*testing.B) []dlock.Option { return []dlock.Option{dlock.WithObserver(dlock.Observer{})} }},
		{"otel-global-noop", func(b *testing.B) []dlock.Option { return observe(b) }},
		{"otel-sdk-metrics", func(b *testing.B) []dlock.Option {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			return observe(b, dlockotel.WithMeterProvider(mp))
		}},
		{"otel-sdk-metrics-traces", func(b *testing.B) []dlock.Option {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
			b.Cleanup(func() {
				_ = mp.Shutdown(context.Background())
				_ = tp.Shutdown(context.Background())
			})
			return observe(b, dlockotel.WithMeterProvider(mp), dlockotel.WithTracerProvider(tp))
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			client := srv.NewClient(c.opts(b)...)
			ctx := context.Background()
			m := client.Mutex("bench")
			b.ReportAllocs()
			for b.Loop() {
				l, err := m.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func observe(b *testing.B, opts ...dlockotel.Option) []dlock.Option {
	tel, err := dlockotel.New(opts...)
	if err != nil {
		b.Fatal(err)
	}
	return []dlock.Option{dlock.WithObserver(tel.Observer())}
}
