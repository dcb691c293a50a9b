package dlockprom_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
	dlockprom "github.com/seed51c676c8/dlock/extra/prometheus"
)

// lockMetrics are the metrics that have the labels name and kind.
var lockMetrics = []string{
	"dlock_wait_seconds", "dlock_hold_seconds", "dlock_acquisitions_total", "dlock_refusals_total",
	"dlock_give_ups_total", "dlock_attempts_total", "dlock_losses_total", "dlock_renewal_failures_total",
	"dlock_renewal_recoveries_total", "dlock_handoffs_total", "dlock_held_leases", "dlock_waiters",
}

// The owner label is on every lock metric when asked, and on none by default; the
// events of two Clients with two owners make two series.
func TestOwnerLabel(t *testing.T) {
	tests := []struct {
		name   string
		opts   []dlockprom.Option
		owners map[string]bool // the owner labels of every lock metric; nil: none
	}{
		{"default", nil, nil},
		{"WithOwnerLabel", []dlockprom.Option{dlockprom.WithOwnerLabel()}, map[string]bool{"web-1": true, "web-2": true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, reg := newCollector(t, tt.opts...)
			srv := dlocktest.Start(t)
			for _, owner := range []string{"web-1", "web-2"} {
				client := patientClient(t, srv, dlock.WithOwner(owner), observed(c))
				if err := tryOnce(client, "report"); err != nil {
					t.Fatal(err)
				}
			}
			for _, metric := range lockMetrics {
				if got := labelValues(t, reg, metric, "owner"); len(got) != len(tt.owners) || !sameKeys(got, tt.owners) {
					t.Errorf("%s: owner labels %v, want %v", metric, got, tt.owners)
				}
			}
			if tt.owners == nil {
				checkAll(t, reg, []expect{{"dlock_acquisitions_total", lock("report", dlock.KindMutex), 2}})
				return
			}
			for owner := range tt.owners {
				checkAll(t, reg, []expect{
					{"dlock_acquisitions_total", with(lock("report", dlock.KindMutex), "owner", owner), 1},
					{"dlock_hold_seconds", with(lock("report", dlock.KindMutex), "owner", owner), 1},
				})
			}
		})
	}
}

func sameKeys(a, b map[string]bool) bool {
	for k := range a {
		if !b[k] {
			return false
		}
	}
	return true
}

// Owners past WithMaxOwners are counted under OtherName, apart from the bound on names:
// a name keeps its label whatever the owners of its events, and the empty owner counts
// against no bound.
func TestOwnerLabelsStayWithinBound(t *testing.T) {
	c, reg := newCollector(t, dlockprom.WithOwnerLabel(), dlockprom.WithMaxOwners(2), dlockprom.WithMaxNames(1))
	o := c.Observer()
	owners := []string{"", "a", "b", "c", "d", ""}
	for _, owner := range owners {
		for _, name := range []string{"x", "y"} {
			o.WaitEnded(dlock.WaitEnd{Name: name, Kind: dlock.KindMutex, Owner: owner, Waited: time.Millisecond, Attempts: 1, Token: 1})
		}
	}
	want := map[string]float64{"": 2, "a": 1, "b": 1, dlockprom.OtherName: 2} // per name label
	for owner, n := range want {
		for _, name := range []string{"x", dlockprom.OtherName} {
			labels := with(lock(name, dlock.KindMutex), "owner", owner)
			checkAll(t, reg, []expect{{"dlock_acquisitions_total", labels, n}})
		}
	}
	if got := labelValues(t, reg, "dlock_acquisitions_total", "owner"); len(got) != len(want) {
		t.Errorf("owner labels %v, want those of %v", got, want)
	}
}

// With the owner label, events allocate nothing once their series exist, nor for an
// owner past the bound, counted under OtherName.
func TestOwnerEventsDoNotAllocate(t *testing.T) {
	c, _ := newCollector(t, dlockprom.WithOwnerLabel(), dlockprom.WithMaxOwners(1))
	o := c.Observer()
	for _, owner := range []string{"first", "past the bound", ""} {
		lockUnlock := func() {
			const name, kind = "a", dlock.KindMutex
			o.WaitStarted(dlock.WaitStart{Name: name, Kind: kind, Owner: owner})
			o.Attempted(dlock.Attempt{Name: name, Kind: kind, Owner: owner, Verdict: dlock.VerdictAcquired, Duration: time.Millisecond})
			o.WaitEnded(dlock.WaitEnd{Name: name, Kind: kind, Owner: owner, Waited: time.Millisecond, Attempts: 1, Token: 1})
			o.Renewal(dlock.Renewal{Name: name, Kind: kind, Owner: owner, Err: context.DeadlineExceeded, Failures: 1})
			o.HandedOff(dlock.HandOff{Name: name, Kind: kind, Owner: owner, Local: true})
			o.HoldEnded(dlock.HoldEnd{Name: name, Kind: kind, Owner: owner, Token: 1, Held: time.Millisecond, Err: dlock.ErrReleased})
		}
		lockUnlock() // makes the series
		if n := testing.AllocsPerRun(100, lockUnlock); n != 0 {
			t.Errorf("events of owner %q: %v allocations, want 0", owner, n)
		}
	}
}

// A registry that gathers a Collector with the owner label checks its series' label
// names against their descriptors (the pedantic registry of newCollector); one of each
// kind of event makes them all.
func TestOwnerLabelGathers(t *testing.T) {
	c, reg := newCollector(t, dlockprom.WithOwnerLabel())
	o := c.Observer()
	o.WaitEnded(dlock.WaitEnd{Name: "a", Kind: dlock.KindMutex, Owner: "h:1", Err: fmt.Errorf("x: %w", context.Canceled)})
	o.HoldEnded(dlock.HoldEnd{Name: "a", Kind: dlock.KindMutex, Owner: "h:1", Err: dlock.ErrLost, Cause: dlock.LossTaken})
	if _, err := prometheus.Gatherer(reg).Gather(); err != nil {
		t.Fatal(err)
	}
	checkAll(t, reg, []expect{
		{"dlock_give_ups_total", map[string]string{"owner": "h:1", "reason": "canceled"}, 1},
		{"dlock_losses_total", map[string]string{"owner": "h:1", "cause": "taken"}, 1},
	})
}
