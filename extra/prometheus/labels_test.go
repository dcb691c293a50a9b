package dlockprom_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
	dlockprom "github.com/seed51c676c8/dlock/extra/prometheus"
)

// Locks with 10,000 distinct names make no more name labels than the bound, plus
// OtherName, and every acquisition is still counted.
func TestNameLabelsStayWithinBound(t *testing.T) {
	const names, workers = 10_000, 8
	tests := []struct {
		name      string
		opts      []dlockprom.Option
		maxLabels int // distinct name labels, OtherName included
	}{
		{"default bound", nil, dlockprom.DefaultMaxNames + 1},
		{"bound of 10", []dlockprom.Option{dlockprom.WithMaxNames(10)}, 11},
		{"name mapped to its prefix", []dlockprom.Option{dlockprom.WithNameLabel(prefix)}, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, reg := newCollector(t, tt.opts...)
			client := patientClient(t, dlocktest.Start(t), observed(c))
			var wg sync.WaitGroup
			errs := make(chan error, workers)
			for w := range workers {
				wg.Go(func() {
					for i := w; i < names; i += workers {
						if err := tryOnce(client, fmt.Sprintf("order:%d", i)); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal(err)
			}
			for _, metric := range []string{"dlock_acquisitions_total", "dlock_wait_seconds", "dlock_attempts_total", "dlock_held_leases"} {
				if got := labelValues(t, reg, metric, "name"); len(got) > tt.maxLabels {
					t.Errorf("%s has %d name labels, want at most %d", metric, len(got), tt.maxLabels)
				}
			}
			checkAll(t, reg, []expect{
				{"dlock_acquisitions_total", nil, names},
				{"dlock_hold_seconds", nil, names},
				{"dlock_held_leases", nil, 0},
			})
		})
	}
}

// prefix maps "order:42" to "order".
func prefix(name string) string {
	p, _, _ := strings.Cut(name, ":")
	return p
}

// tryOnce takes the lock name with TryLock and releases it.
func tryOnce(client *dlock.Client, name string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	lease, err := client.Mutex(name).TryLock(ctx)
	if err != nil {
		return fmt.Errorf("TryLock(%q): %w", name, err)
	}
	return lease.Unlock(ctx)
}

// The observer's functions allocate nothing once the series of a name label exist, nor
// for a name past the bound, counted under OtherName.
func TestEventsDoNotAllocate(t *testing.T) {
	c, _ := newCollector(t, dlockprom.WithMaxNames(1))
	o := c.Observer()
	lockUnlock := func(name string) {
		o.WaitStarted(dlock.WaitStart{Name: name, Kind: dlock.KindMutex})
		o.Attempted(dlock.Attempt{Name: name, Kind: dlock.KindMutex, Verdict: dlock.VerdictAcquired, Duration: time.Millisecond})
		o.WaitEnded(dlock.WaitEnd{Name: name, Kind: dlock.KindMutex, Waited: time.Millisecond, Attempts: 1, Token: 1})
		o.HoldEnded(dlock.HoldEnd{Name: name, Kind: dlock.KindMutex, Token: 1, Held: time.Millisecond, Err: dlock.ErrReleased})
	}
	refused := func(name string) {
		o.WaitStarted(dlock.WaitStart{Name: name, Kind: dlock.KindMutex})
		o.WaitEnded(dlock.WaitEnd{Name: name, Kind: dlock.KindMutex, Attempts: 1, Err: dlock.ErrNotAcquired})
	}
	lost := func(name string) {
		o.Renewal(dlock.Renewal{Name: name, Kind: dlock.KindMutex, Err: context.DeadlineExceeded, Failures: 1})
		o.HoldEnded(dlock.HoldEnd{Name: name, Kind: dlock.KindMutex, Err: dlock.ErrLost, Cause: dlock.LossExpired})
		o.HandedOff(dlock.HandOff{Name: name, Kind: dlock.KindMutex, Local: true})
	}
	gaveUp := fmt.Errorf("dlock: waiting for %q: %w", "a", context.Canceled)
	tests := []struct {
		name  string
		event func(name string)
	}{
		{"lock and unlock", lockUnlock},
		{"refused", refused},
		{"lost", lost},
		{"given up", func(name string) {
			o.WaitEnded(dlock.WaitEnd{Name: name, Kind: dlock.KindMutex, Err: gaveUp})
		}},
	}
	for _, tt := range tests {
		for _, name := range []string{"first", "past the bound"} {
			tt.event(name) // makes the series
			if n := testing.AllocsPerRun(100, func() { tt.event(name) }); n != 0 {
				t.Errorf("%s of %q: %v allocations, want 0", tt.name, name, n)
			}
		}
	}
}

func TestNewRejectsBucketsThatDoNotIncrease(t *testing.T) {
	tests := []struct {
		name string
		opt  dlockprom.Option
	}{
		{"wait, decreasing", dlockprom.WithWaitBuckets([]float64{1, 0.5})},
		{"wait, repeated", dlockprom.WithWaitBuckets([]float64{0.1, 0.1})},
		{"hold, decreasing", dlockprom.WithHoldBuckets([]float64{0.1, 1, 0.2})},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := dlockprom.New(tt.opt)
			if !errors.Is(err, dlockprom.ErrBadBuckets) || c != nil {
				t.Errorf("New: %v, %v; want nil, ErrBadBuckets", c, err)
			}
		})
	}
}
