package dlockotel_test

import (
	"context"
	"testing"
	"time"

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

// BenchmarkObserverEvents is the Telemetry's own cost per uncontended Lock+Unlock, without
// Redis: the four events such a Lock+Unlock sends, given to the Observer directly.
func BenchmarkObserverEvents(b *testing.B) {
	for _, c := range []struct {
		name string
		opts func(b *testing.B) []dlockotel.Option
	}{
		{"otel-global-noop", func(*testing.B) []dlockotel.Option { return nil }},
		{"otel-sdk-metrics", func(b *testing.B) []dlockotel.Option {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			b.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
			return []dlockotel.Option{dlockotel.WithMeterProvider(mp)}
		}},
		{"otel-sdk-metrics-traces", func(b *testing.B) []dlockotel.Option {
			mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(sdkmetric.NewManualReader()))
			tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(tracetest.NewNoopExporter()))
			b.Cleanup(func() {
				_ = mp.Shutdown(context.Background())
				_ = tp.Shutdown(context.Background())
			})
			return []dlockotel.Option{dlockotel.WithMeterProvider(mp), dlockotel.WithTracerProvider(tp)}
		}},
	} {
		b.Run(c.name, func(b *testing.B) {
			tel, err := dlockotel.New(c.opts(b)...)
			if err != nil {
				b.Fatal(err)
			}
			o := tel.Observer()
			const name, kind = "bench", dlock.KindMutex
			b.ReportAllocs()
			var token uint64
			for b.Loop() {
				token++
				o.WaitStarted(dlock.WaitStart{Name: name, Kind: kind})
				o.Attempted(dlock.Attempt{Name: name, Kind: kind, Verdict: dlock.VerdictAcquired, Duration: 100 * time.Microsecond})
				o.WaitEnded(dlock.WaitEnd{Name: name, Kind: kind, Waited: 120 * time.Microsecond, Attempts: 1, Token: token})
				o.HoldEnded(dlock.HoldEnd{Name: name, Kind: kind, Token: token, Held: 50 * time.Microsecond, Err: dlock.ErrReleased})
			}
		})
	}
}
