package faults

import (
	"cmp"
	"fmt"
	"slices"
	"strings"
	"time"
)

// checkRndExclusive: at no moment do two leases hold one name, except readers of an
// RWMutex together, and a Semaphore's holders within its size. The most any name holds
// is reached when some lease begins, so each lease is checked against those still held
// as it began.
func checkRndExclusive(log rndLog) []violation {
	var out []violation
	groups := byHoldName(log.holds)
	for _, name := range sortedNames(groups) {
		hs := groups[name]
		for i, h := range hs {
			if h.to <= h.from {
				continue
			}
			var with []rndHold
			for _, g := range hs[:i] {
				if g.to > h.from && g.to > g.from {
					with = append(with, g)
				}
			}
			if msg := conflict(log, h, with); msg != "" && len(out) < maxViolations {
				out = append(out, violation{chkExclusive, msg})
			}
		}
	}
	return out
}

// conflict says what is wrong with h beginning while with are held, or "".
func conflict(log rndLog, h rndHold, with []rndHold) string {
	if h.kind == "sem" {
		used := h.n
		for _, g := range with {
			used += g.n
		}
		if used <= h.size {
			return ""
		}
		return fmt.Sprintf("%d permits of %q (size %d) out at %s: %v (%d) began while %s were held",
			used, h.name, h.size, log.rel(h.from), h, h.n, holdList(log, with))
	}
	var other []rndHold
	for _, g := range with {
		if h.kind != "read" || g.kind != "read" {
			other = append(other, g)
		}
	}
	if len(other) == 0 {
		return ""
	}
	over := slices.MinFunc(other, func(a, b rndHold) int { return cmp.Compare(a.to, b.to) }).to - h.from
	return fmt.Sprintf("two holders of %q at once for %.1f ms: %v from %s while %s",
		h.name, ms(over), h, log.rel(h.from), holdList(log, other))
}

// holdList renders holds with their times.
func holdList(log rndLog, hs []rndHold) string {
	var parts []string
	for _, g := range hs {
		parts = append(parts, fmt.Sprintf("%v [%s, %s]", g, log.rel(g.from), log.rel(g.to)))
	}
	return strings.Join(parts, " and ")
}

// checkRndTokens: a lease's fencing token is larger than that of every lease of the same
// name whose Lock had returned before this one was called. (Leases whose acquisitions
// overlap in time may have been granted in either order.)
func checkRndTokens(log rndLog) []violation {
	var out []violation
	groups := byHoldName(log.holds)
	for _, name := range sortedNames(groups) {
		byFrom := groups[name]
		bySince := slices.SortedFunc(slices.Values(byFrom), func(a, b rndHold) int { return cmp.Compare(a.since, b.since) })
		var top rndHold // the largest token among the leases returned so far
		j := 0
		for _, h := range bySince {
			for ; j < len(byFrom) && byFrom[j].from < h.since; j++ {
				if byFrom[j].token > top.token || top.proc == "" {
					top = byFrom[j]
				}
			}
			if top.proc != "" && h.token <= top.token && len(out) < maxViolations {
				out = append(out, violation{chkTokens, fmt.Sprintf("token %d of %v (called %s, returned %s) is not above token %d of %v (returned %s)",
					h.token, h, log.rel(h.since), log.rel(h.from), top.token, top, log.rel(top.from))})
			}
		}
	}
	return out
}

// checkRndFree: no lock stays free longer than b.free while someone waits for it, outside
// the fault windows (each fault's span and afterglow after it). A lock is free when no
// lease holds any part of it; a MultiMutex waiter waits for a time when all its names are.
// It returns the longest such time, and its name.
func checkRndFree(log rndLog, b rndBounds) (span, string, []violation) {
	free := map[string][]span{}
	for name, hs := range byHoldName(log.holds) {
		var held []span
		for _, h := range hs {
			held = append(held, span{h.from, h.to})
		}
		free[name] = complement(union(held), log.start, log.end)
	}
	freeOf := func(name string) []span {
		if f, ok := free[name]; ok {
			return f
		}
		return []span{{log.start, log.end}} // never held
	}
	waited := map[string][]span{} // per name: free while someone waited for it
	for _, w := range log.waits {
		s := []span{{w.from, w.to}}
		for _, n := range w.names {
			s = intersect(s, freeOf(n))
		}
		for _, n := range w.names {
			waited[n] = append(waited[n], s...)
		}
	}
	var worst span
	var worstName string
	var out []violation
	for _, name := range sortedNames(waited) {
		l := longest(subtract(union(waited[name]), faultSpans(log, name, b.afterglow)))
		if l.len() > worst.len() {
			worst, worstName = l, name
		}
		if l.len() > b.free {
			out = append(out, violation{chkFreeTime, fmt.Sprintf("%q free for %.0f ms from %s to %s while someone waited and no fault was active (bound %v)",
				name, ms(l.len()), log.rel(l.from), log.rel(l.to), b.free)})
		}
	}
	return worst, worstName, out
}

// faultSpans returns when a fault, or what it left behind, may have held up name: every
// fault on its deployment, from its start to afterglow after its end, and every attempt
// of unknown fate on name, from its start to the latest it may hold name.
func faultSpans(log rndLog, name string, afterglow time.Duration) []span {
	var out []span
	for _, f := range log.faults {
		if f.scope == "" || f.scope == log.scopes[name] {
			out = append(out, span{f.from, f.to + int64(afterglow)})
		}
	}
	for _, u := range log.unsure {
		if slices.Contains(u.names, name) {
			out = append(out, span{u.from, u.until})
		}
	}
	return union(out)
}
