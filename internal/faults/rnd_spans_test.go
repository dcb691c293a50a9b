package faults

import (
	"cmp"
	"slices"
	"time"
)

// span is a stretch of wall-clock time, [from, to) in nanoseconds. The random
// scenario's free-time check is set arithmetic on spans: when a lock was free, when
// someone waited for it, when a fault was active.
type span struct{ from, to int64 }

func (s span) len() time.Duration { return time.Duration(s.to - s.from) }

// union returns ss sorted and merged, with empty spans dropped.
func union(ss []span) []span {
	ss = slices.Clone(ss)
	slices.SortFunc(ss, func(a, b span) int { return cmp.Compare(a.from, b.from) })
	var out []span
	for _, s := range ss {
		switch {
		case s.to <= s.from:
		case len(out) > 0 && s.from <= out[len(out)-1].to:
			out[len(out)-1].to = max(out[len(out)-1].to, s.to)
		default:
			out = append(out, s)
		}
	}
	return out
}

// intersect returns the time in both a and b, both as union returns them.
func intersect(a, b []span) []span {
	var out []span
	for i, j := 0, 0; i < len(a) && j < len(b); {
		from, to := max(a[i].from, b[j].from), min(a[i].to, b[j].to)
		if from < to {
			out = append(out, span{from, to})
		}
		if a[i].to < b[j].to {
			i++
		} else {
			j++
		}
	}
	return out
}

// complement returns the time in [lo, hi) outside a (as union returns it).
func complement(a []span, lo, hi int64) []span {
	var out []span
	at := lo
	for _, s := range a {
		if s.from > at {
			out = append(out, span{at, min(s.from, hi)})
		}
		at = max(at, s.to)
	}
	if at < hi {
		out = append(out, span{at, hi})
	}
	return union(out)
}

// subtract returns the time in a outside b.
func subtract(a, b []span) []span {
	if len(a) == 0 {
		return nil
	}
	return intersect(a, complement(b, a[0].from, a[len(a)-1].to))
}

// longest returns the longest span of ss, or the zero span.
func longest(ss []span) span {
	var best span
	for _, s := range ss {
		if s.len() > best.len() {
			best = s
		}
	}
	return best
}
