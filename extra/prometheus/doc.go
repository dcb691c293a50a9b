// Package dlockprom exports what dlock's locks do as Prometheus metrics: a Collector is a
// prometheus.Collector fed by the dlock.Observer it returns. It is a module of its own
// (github.com/seed51c676c8/dlock/extra/prometheus), so that dlock itself depends on no
// Prometheus library. Its name is not its path's last element (prometheus), so that it
// sits beside client_golang's prometheus without a rename:
//
//	import dlockprom "github.com/seed51c676c8/dlock/extra/prometheus"
//
//	metrics, err := dlockprom.New(dlockprom.WithNameLabel(func(name string) string {
//		prefix, _, _ := strings.Cut(name, ":") // "order:42" -> "order"
//		return prefix
//	}))
//	if err != nil {
//		return err
//	}
//	prometheus.MustRegister(metrics)
//	client := dlock.New(rdb, dlock.WithObserver(metrics.Observer()))
//
// # Metrics
//
// Every metric but the last has the labels name (the lock's name, or the label
// WithNameLabel makes of it) and kind (mutex, fair, read, write or semaphore: an RWMutex's
// read and write leases are apart), and owner too with WithOwnerLabel (see Owners):
//
//   - dlock_wait_seconds, a histogram of how long Lock, TryLock and Acquire calls took,
//     whatever they came to; its _sum's rate is how many callers wait at once, on average.
//   - dlock_hold_seconds, a histogram of how long leases were held, released or lost.
//   - dlock_acquisitions_total: calls that acquired the lock (an acquisition made by a
//     hand-off or a grant too).
//   - dlock_refusals_total: TryLock and TryAcquire calls refused because the lock was held.
//   - dlock_give_ups_total{reason}: Lock and Acquire calls that ended without the lock,
//     by reason: canceled or deadline (the ctx's), closed (the Client), error (Redis
//     failed, or the input was bad).
//   - dlock_attempts_total{verdict}: attempts in Redis, by verdict (acquired, held, split,
//     late, failed: dlock.Verdict). A call may make several, or none when the lock was
//     handed to it.
//   - dlock_losses_total{cause}: leases lost, by cause (expired, taken: dlock.LossCause).
//   - dlock_renewal_failures_total and dlock_renewal_recoveries_total: renewals that
//     failed, and that succeeded again after failures.
//   - dlock_handoffs_total{local}: locks passed to a waiter without its own attempt,
//     local="true" from a goroutine of the same process, local="false" granted by a
//     release in Redis.
//   - dlock_held_leases and dlock_waiters, gauges: leases held, and calls waiting, now.
//   - dlock_node_silences_total{addr}: times a Redis node let a request time out and was
//     then treated as silent.
//
// The series of a name and kind are made, at 0, by their first event. Several Clients
// may share one Collector; their events add up.
//
// # Owners
//
// WithOwnerLabel adds the label owner to every metric that has name and kind: the owner
// name of the Client that sent the event (dlock.WithOwner, by default "host:pid"), so that
// the series of one program's Clients can be told from another's, with the names that
// dlock status shows. It is off by default, and dashboard.json and alerts.yml are written
// for the default: host and pid change at every restart, and each owner makes its own
// series.
//
// # Bounded labels
//
// Lock names are often unbounded ("order:42"), and every name label makes 57 series for
// each kind it is used with, 38 of them the two histograms' (fewer buckets make fewer:
// WithWaitBuckets, WithHoldBuckets). WithNameLabel maps a name to its label; WithMaxNames bounds the distinct labels
// (DefaultMaxNames, 100, unless set): the events of any name that comes after the bound
// is reached are counted under the label OtherName, "other". A name keeps the label it
// got first, and the Collector keeps nothing of a name counted as other, so its memory
// stays bounded too.
//
// Owners have a bound of their own, WithMaxOwners (DefaultMaxOwners, 10, unless set),
// counted in the same way, past which owners are counted under OtherName. The bounds are
// apart so that each keeps its meaning: a name counts once against the names' bound
// whatever its owners, and its series are multiplied by at most the owner bound plus one.
// A Collector sees the owners of the Clients it observes, normally one per Client and all
// in its process; the bound is for a program that names Clients by job or request.
//
// # Cost
//
// The Observer's functions are called on the goroutines doing the work, so they are
// cheap: once a name label and kind have their series, an event is a map lookup under a
// shared read lock and the metric's atomic update, with no allocation; the events of an
// uncontended Lock+Unlock cost the Collector a few hundred nanoseconds together
// (BenchmarkCollectorEvents), next to the round trips of the Lock+Unlock itself
// (BenchmarkLockUnlock, on a real Redis, with and without the Collector).
//
// # Dashboard and alerts
//
// Next to this package, dashboard.json is a Grafana dashboard of these metrics (hottest
// locks by wait, p99 wait and hold, losses by cause, acquisitions, refusals and give-ups,
// held leases and waiters, attempts by verdict, hand-offs, renewal failures and silent
// nodes), with a Prometheus data source and lock and kind filters; import it in Grafana.
// alerts.yml is a Prometheus rule file: DlockLeaseLost (a lease was lost in the last 5
// minutes), DlockWaitsFarAboveHolds (p99 wait over 10 times p99 hold for 10 minutes),
// DlockRenewalsFailing and DlockNodeSilent. The package's tests check that every query of
// both names only metrics the Collector exports, and that the rules fire as
// alerts_test.yml expects (promtool test rules).
package dlockprom
