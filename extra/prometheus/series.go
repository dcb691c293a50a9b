package dlockprom

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/seed51c676c8/dlock"
)

// verdicts and causes are the label values that series resolves ahead, indexed by
// dlock.Verdict and dlock.LossCause; a value outside them (from a later dlock) is looked
// up in its vector at each event instead.
var (
	verdicts = []dlock.Verdict{dlock.VerdictAcquired, dlock.VerdictHeld, dlock.VerdictSplit, dlock.VerdictLate, dlock.VerdictFailed}
	causes   = []dlock.LossCause{dlock.NotLost, dlock.LossExpired, dlock.LossTaken}
	reasons  = []string{reasonCanceled, reasonDeadline, reasonClosed, reasonError}
)

// series holds the metrics of one name label, kind and owner label, resolved from their
// vectors once, so that an event costs a map lookup and the metric's own update, and
// allocates nothing.
type series struct {
	lv           []string // the label values: name, kind, and owner with WithOwnerLabel
	wait, hold   prometheus.Observer
	acquisitions prometheus.Counter
	refusals     prometheus.Counter
	giveUps      [4]prometheus.Counter // indexed as reasons
	attempts     [5]prometheus.Counter // indexed by dlock.Verdict
	losses       [3]prometheus.Counter // indexed by dlock.LossCause; [NotLost] is nil
	renewalFails prometheus.Counter
	renewalOKs   prometheus.Counter
	handOffs     [2]prometheus.Counter // [0] granted in Redis, [1] local
	held         prometheus.Gauge
	waiters      prometheus.Gauge
}

// newSeries resolves, and so creates at 0, every series of key; its owner is a label
// only with WithOwnerLabel (withOwner).
func newSeries(m *metrics, key seriesKey, withOwner bool) *series {
	lv := []string{key.name, key.kind}
	if withOwner {
		lv = append(lv, key.owner)
	}
	s := &series{
		lv:           lv,
		wait:         m.wait.WithLabelValues(lv...),
		hold:         m.hold.WithLabelValues(lv...),
		acquisitions: m.acquisitions.WithLabelValues(lv...),
		refusals:     m.refusals.WithLabelValues(lv...),
		renewalFails: m.renewalFails.WithLabelValues(lv...),
		renewalOKs:   m.renewalOKs.WithLabelValues(lv...),
		held:         m.held.WithLabelValues(lv...),
		waiters:      m.waiters.WithLabelValues(lv...),
	}
	for i, r := range reasons {
		s.giveUps[i] = m.giveUps.WithLabelValues(s.with(r)...)
	}
	for _, v := range verdicts {
		s.attempts[v] = m.attempts.WithLabelValues(s.with(v.String())...)
	}
	for _, c := range causes[1:] {
		s.losses[c] = m.losses.WithLabelValues(s.with(c.String())...)
	}
	s.handOffs[0] = m.handOffs.WithLabelValues(s.with("false")...)
	s.handOffs[1] = m.handOffs.WithLabelValues(s.with("true")...)
	return s
}

// with returns the series' label values and then v, in a new slice.
func (s *series) with(v string) []string {
	return append(s.lv[:len(s.lv):len(s.lv)], v)
}

// attempt returns the counter of verdict v.
func (s *series) attempt(m *metrics, v dlock.Verdict) prometheus.Counter {
	if v >= 0 && int(v) < len(s.attempts) {
		return s.attempts[v]
	}
	return m.attempts.WithLabelValues(s.with(v.String())...)
}

// loss returns the counter of cause c, which is not NotLost.
func (s *series) loss(m *metrics, c dlock.LossCause) prometheus.Counter {
	if c > dlock.NotLost && int(c) < len(s.losses) {
		return s.losses[c]
	}
	return m.losses.WithLabelValues(s.with(c.String())...)
}

// handOff returns the counter of a hand-off (local) or a grant.
func (s *series) handOff(local bool) prometheus.Counter {
	if local {
		return s.handOffs[1]
	}
	return s.handOffs[0]
}
