package dlockprom

import (
	"github.com/prometheus/client_golang/prometheus"
)

// The labels. Every lock metric has name and kind, and owner with WithOwnerLabel; kind is
// the event's Kind (dlock.KindMutex, KindFair, KindRead, KindWrite, KindSemaphore).
const (
	labelName    = "name"
	labelKind    = "kind"
	labelOwner   = "owner"
	labelReason  = "reason"  // give-ups: why the wait ended without the lock
	labelVerdict = "verdict" // attempts: dlock.Verdict.String()
	labelCause   = "cause"   // losses: dlock.LossCause.String()
	labelLocal   = "local"   // hand-offs: "true" between goroutines of a process, "false" a grant in Redis
	labelAddr    = "addr"    // silent nodes: the node's address
)

// Give-up reasons, the values of the reason label.
const (
	reasonCanceled = "canceled" // the ctx was cancelled
	reasonDeadline = "deadline" // the ctx's deadline passed
	reasonClosed   = "closed"   // the Client was closed
	reasonError    = "error"    // anything else: Redis failed, bad input
)

// metrics are the vectors a Collector exports, one per metric name.
type metrics struct {
	wait         *prometheus.HistogramVec
	hold         *prometheus.HistogramVec
	acquisitions *prometheus.CounterVec
	refusals     *prometheus.CounterVec
	giveUps      *prometheus.CounterVec
	attempts     *prometheus.CounterVec
	losses       *prometheus.CounterVec
	renewalFails *prometheus.CounterVec
	renewalOKs   *prometheus.CounterVec
	handOffs     *prometheus.CounterVec
	held         *prometheus.GaugeVec
	waiters      *prometheus.GaugeVec
	nodeSilences *prometheus.CounterVec
}

func newMetrics(cfg config) metrics {
	lock := []string{labelName, labelKind}
	if cfg.ownerLabel {
		lock = append(lock, labelOwner)
	}
	with := func(l string) []string { return append(lock[:len(lock):len(lock)], l) }
	counter := func(name, help string, labels []string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "dlock", Name: name, Help: help}, labels)
	}
	return metrics{
		wait: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "dlock", Name: "wait_seconds", Buckets: cfg.waitBuckets,
			Help: "How long Lock, TryLock and Acquire calls took, whatever their outcome (acquired, refused, given up).",
		}, lock),
		hold: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Namespace: "dlock", Name: "hold_seconds", Buckets: cfg.holdBuckets,
			Help: "How long leases were held, from the acquisition to the release or the loss.",
		}, lock),
		acquisitions: counter("acquisitions_total", "Lock, TryLock and Acquire calls that acquired the lock.", lock),
		refusals:     counter("refusals_total", "TryLock and TryAcquire calls refused because the lock was held.", lock),
		giveUps: counter("give_ups_total",
			"Lock and Acquire calls that ended without the lock for another reason than a refusal: "+
				"canceled, deadline (of the ctx), closed (the Client), error.", with(labelReason)),
		attempts: counter("attempts_total",
			"Attempts to take a lock in Redis, by verdict: acquired, held, split, late, failed.", with(labelVerdict)),
		losses: counter("losses_total",
			"Leases that ended without Unlock, by cause: expired (not renewed in time), taken (the key was no longer theirs).",
			with(labelCause)),
		renewalFails: counter("renewal_failures_total", "Renewals of a lease that failed.", lock),
		renewalOKs: counter("renewal_recoveries_total",
			"Renewals that succeeded after failures of the same lease.", lock),
		handOffs: counter("handoffs_total",
			"Locks passed to a waiter without its own attempt: local=\"true\" from a goroutine of the process, "+
				"local=\"false\" granted by a release in Redis.", with(labelLocal)),
		held: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "dlock", Name: "held_leases", Help: "Leases held now (acquired and not yet released or lost).",
		}, lock),
		waiters: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Namespace: "dlock", Name: "waiters", Help: "Lock, TryLock and Acquire calls under way now.",
		}, lock),
		nodeSilences: prometheus.NewCounterVec(prometheus.CounterOpts{
			Namespace: "dlock", Name: "node_silences_total",
			Help: "Times a Redis node let a request time out and was then treated as silent.",
		}, []string{labelAddr}),
	}
}

// collectors lists every vector, for Describe and Collect.
func (m *metrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.wait, m.hold, m.acquisitions, m.refusals, m.giveUps, m.attempts,
		m.losses, m.renewalFails, m.renewalOKs, m.handOffs, m.held, m.waiters, m.nodeSilences}
}
