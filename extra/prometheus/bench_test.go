package dlockprom_test

import (
	"context"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
	dlockprom "github.com/seed51c676c8/dlock/extra/prometheus"
)

// go test -run '^$' -bench . -benchmem -count 5 ./extra/prometheus

// BenchmarkLockUnlock takes and releases one lock, uncontended, on a real redis-server:
// with no observer, with an Observer of no functions, with one of functions that do
// nothing, and with the Collector, in the same run on the same server. The difference
// between the last two is the Collector's cost per Lock+Unlock.
func BenchmarkLockUnlock(b *testing.B) {
	srv := dlocktest.Start(b)
	collector, err := dlockprom.New()
	if err != nil {
		b.Fatal(err)
	}
	observers := []struct {
		name string
		opts []dlock.Option
	}{
		{"none", nil},
		{"empty", []dlock.Option{dlock.WithObserver(dlock.Observer{})}},
		{"noop", []dlock.Option{dlock.WithObserver(noop)}},
		{"collector", []dlock.Option{dlock.WithObserver(collector.Observer())}},
	}
	for _, o := range observers {
		b.Run(o.name, func(b *testing.B) {
			m := srv.NewClient(o.opts...).Mutex("bench")
			ctx := context.Background()
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

// noop is an Observer whose every function does nothing.
var noop = dlock.Observer{
	WaitStarted: func(dlock.WaitStart) {},
	Attempted:   func(dlock.Attempt) {},
	WaitEnded:   func(dlock.WaitEnd) {},
	HoldEnded:   func(dlock.HoldEnd) {},
	Renewal:     func(dlock.Renewal) {},
	HandedOff:   func(dlock.HandOff) {},
	NodeSilent:  func(dlock.NodeSilence) {},
}

// BenchmarkCollectorEvents sends the Collector the events of one uncontended Lock+Unlock
// (wait started, attempt, wait ended, hold ended) directly: its cost per operation
// without Redis's. Parallel: from every core at once, on one lock.
func BenchmarkCollectorEvents(b *testing.B) {
	collector, err := dlockprom.New()
	if err != nil {
		b.Fatal(err)
	}
	o := collector.Observer()
	lockUnlock := func() {
		const name, kind = "bench", dlock.KindMutex
		o.WaitStarted(dlock.WaitStart{Name: name, Kind: kind})
		o.Attempted(dlock.Attempt{Name: name, Kind: kind, Verdict: dlock.VerdictAcquired, Duration: 100 * time.Microsecond})
		o.WaitEnded(dlock.WaitEnd{Name: name, Kind: kind, Waited: 100 * time.Microsecond, Attempts: 1, Token: 1})
		o.HoldEnded(dlock.HoldEnd{Name: name, Kind: kind, Token: 1, Held: time.Millisecond, Err: dlock.ErrReleased})
	}
	b.Run("serial", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			lockUnlock()
		}
	})
	b.Run("parallel", func(b *testing.B) {
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				lockUnlock()
			}
		})
	})
}
