package dlockprom_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
)

// The counts of a known workload are exact: every Lock, TryLock and Acquire call and
// every hold is counted once, under its name and kind, and the gauges come back to 0.
func TestWorkloadCountsExactly(t *testing.T) {
	const (
		acquisitions = 20 // Lock and Unlock of "orders"
		refusals     = 5  // TryLock of "busy", held by another process
		giveUps      = 3  // Lock of "busy" with a short deadline
		losses       = 4  // read leases of "catalog", their keys flushed
	)
	c, reg := newCollector(t)
	srv := dlocktest.Start(t)
	client := patientClient(t, srv, observed(c))
	ctx := context.Background()

	for range acquisitions {
		lease, err := client.Mutex("orders").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	other, err := srv.NewClient().Mutex("busy").Lock(ctx) // another process, unobserved
	if err != nil {
		t.Fatal(err)
	}
	defer other.Unlock(ctx)
	for range refusals {
		if _, err := client.Mutex("busy").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock of a held lock: %v, want ErrNotAcquired", err)
		}
	}
	for range giveUps {
		wctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		_, err := client.Mutex("busy").Lock(wctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock of a held lock until a deadline: %v, want DeadlineExceeded", err)
		}
	}
	leases := make([]*dlock.Lease, losses)
	for i := range leases {
		if leases[i], err = client.RWMutex("catalog", dlock.TTL(5*time.Second)).RLock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	srv.Flush() // the next renewal, in under 2s, finds the keys gone: taken, not expired
	for _, l := range leases {
		dlocktest.AssertLost(t, l, 15*time.Second)
	}

	orders, busy, catalog := lock("orders", dlock.KindMutex), lock("busy", dlock.KindMutex), lock("catalog", dlock.KindRead)
	eventually(t, reg, 5*time.Second, []expect{
		{"dlock_acquisitions_total", orders, acquisitions},
		{"dlock_attempts_total", with(orders, "verdict", "acquired"), acquisitions},
		{"dlock_wait_seconds", orders, acquisitions},
		{"dlock_hold_seconds", orders, acquisitions},
		{"dlock_refusals_total", busy, refusals},
		{"dlock_give_ups_total", with(busy, "reason", "deadline"), giveUps},
		{"dlock_give_ups_total", busy, giveUps},
		{"dlock_acquisitions_total", busy, 0},
		{"dlock_wait_seconds", busy, refusals + giveUps},
		{"dlock_hold_seconds", busy, 0},
		{"dlock_acquisitions_total", catalog, losses},
		{"dlock_losses_total", with(catalog, "cause", "taken"), losses},
		{"dlock_losses_total", nil, losses},
		{"dlock_hold_seconds", catalog, losses},
		{"dlock_acquisitions_total", nil, acquisitions + losses},
		{"dlock_held_leases", nil, 0},
		{"dlock_waiters", nil, 0},
	})
}

// A lease lost because Redis hung is counted as expired, with the renewals that failed
// before its deadline; one whose key was deleted is counted as taken.
func TestLossesByCause(t *testing.T) {
	tests := []struct {
		name  string
		cause string
		lose  func(*dlocktest.RedisServer)
	}{
		{"deleted key", "taken", func(s *dlocktest.RedisServer) { s.Flush() }},
		{"hung server", "expired", func(s *dlocktest.RedisServer) { s.Pause() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, reg := newCollector(t)
			srv := dlocktest.Start(t)
			client := srv.NewClient(observed(c))
			lease, err := client.Mutex("nightly", dlock.TTL(3*time.Second)).Lock(context.Background())
			if err != nil {
				t.Fatal(err)
			}
			tt.lose(srv)
			defer srv.Resume()
			dlocktest.AssertLost(t, lease, 10*time.Second)
			nightly := lock("nightly", dlock.KindMutex)
			eventually(t, reg, 5*time.Second, []expect{
				{"dlock_losses_total", with(nightly, "cause", tt.cause), 1},
				{"dlock_losses_total", nightly, 1},
				{"dlock_held_leases", nightly, 0},
			})
			if tt.cause == "expired" {
				if n := value(t, reg, "dlock_renewal_failures_total", nightly); n < 1 {
					t.Errorf("dlock_renewal_failures_total = %v after renewing on a hung server for 3s, want >= 1", n)
				}
			}
		})
	}
}

// Under contention every acquisition is counted once, made either by an attempt or by a
// hand-off or grant, and the gauges come back to 0.
func TestContentionAddsUp(t *testing.T) {
	const procs, workers, rounds = 2, 4, 10
	c, reg := newCollector(t)
	srv := dlocktest.Start(t)
	ctx := context.Background()
	var wg sync.WaitGroup
	errs := make(chan error, procs*workers)
	for range procs {
		client := patientClient(t, srv, observed(c))
		for range workers {
			wg.Go(func() {
				for range rounds {
					lease, err := client.Mutex("hot").Lock(ctx)
					if err != nil {
						errs <- err
						return
					}
					time.Sleep(time.Millisecond)
					if err := lease.Unlock(ctx); err != nil {
						errs <- err
						return
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	hot, total := lock("hot", dlock.KindMutex), float64(procs*workers*rounds)
	checkAll(t, reg, []expect{
		{"dlock_acquisitions_total", hot, total},
		{"dlock_wait_seconds", hot, total},
		{"dlock_hold_seconds", hot, total},
		{"dlock_held_leases", hot, 0},
		{"dlock_waiters", hot, 0},
	})
	byAttempt := value(t, reg, "dlock_attempts_total", with(hot, "verdict", "acquired"))
	handed := value(t, reg, "dlock_handoffs_total", hot)
	if byAttempt+handed != total {
		t.Errorf("%v acquisitions by attempt + %v hand-offs and grants = %v, want %v", byAttempt, handed, byAttempt+handed, total)
	}
	t.Logf("%v by attempt, %v local hand-offs, %v grants", byAttempt,
		value(t, reg, "dlock_handoffs_total", with(hot, "local", "true")),
		value(t, reg, "dlock_handoffs_total", with(hot, "local", "false")))
}
