package faults

import (
	"time"

	"github.com/seed51c676c8/dlock/internal/faultproxy"
)

// linkTTL is the holder's lease in the link scenarios.
const linkTTL = 600 * time.Millisecond

// linkLost: A holds the lock through a proxy and works under it, writing to the fenced
// storage every 10ms and checking its lease before each write; then the proxy breaks
// (fault). A must see its lease end by its ValidUntil and stop writing; B (direct) takes
// the lock after that. A then tries to take another lock through the broken link: it
// must not get a lease that has already run out.
func linkLost(fault func(r *run, p *faultproxy.Proxy)) func(r *run) {
	return func(r *run) {
		d := deploy(r, 1)
		p := faultproxy.New(r.t, d.nodes[0].Addr)
		a := d.spawn(r, "A", []string{p.Addr})
		b := d.spawn(r, "B", d.addrs())
		a.send(command{Op: "lock", ID: "a", Name: "res", TTL: linkTTL})
		if _, ok := a.expectEv(evAcquired, "a", chkNoErrors); !ok {
			return
		}
		a.send(command{Op: "work", ID: "a", Every: 10 * time.Millisecond, Wait: 6 * linkTTL})
		r.sleep(linkTTL / 2)
		fault(r, p)
		r.step("link broken")
		b.send(command{Op: "lock", ID: "b", Name: "res", TTL: linkTTL, Wait: 10 * linkTTL})
		_, took := b.expectEv(evAcquired, "b", chkTakeover)
		if end, ok := a.awaitWithin(10*linkTTL, isEnd("a")); ok {
			r.value(ms(end.At - end.Valid))
		}
		a.awaitWithin(10*linkTTL, func(e event) bool { return e.Ev == evDone && e.Op == "work" })
		if took {
			b.send(command{Op: "unlock", ID: "b"})
			b.awaitEv(evDone, "b")
		}
		lateLock(r, a)
		finishAll(a, b)
		ivs := intervals(a, b)
		checkExclusive(r, byName(ivs, "res"))
		checkLossOnTime(r, byProc(ivs, "A"))
		checkWritesValid(r, a, ivs)
		checkStore(r, d, "res")
	}
}

// lateLock: an attempt through the broken link must fail, or return a lease that is
// still valid.
func lateLock(r *run, a *child) {
	a.send(command{Op: "lock", ID: "late", Name: "late", TTL: linkTTL, Try: true, Wait: 3 * linkTTL})
	e := a.awaitEv(evAcquired, "late")
	if e.Ev == evAcquired {
		r.expect(e.Valid > e.At, chkBelief, "Lock through the broken link returned a lease whose ValidUntil %s had passed at %s", clock(e.Valid), clock(e.At))
	}
}

func delayReplies(r *run, p *faultproxy.Proxy) { p.SetLatency(r.t, 2*linkTTL) }
func cutLink(r *run, p *faultproxy.Proxy)      { p.Cut(r.t) }

// checkWritesValid reports writes that c's workers made after they stopped believing in
// their lease (at its ValidUntil at the latest), plus 1ms for the clock readings.
func checkWritesValid(r *run, c *child, ivs []interval) {
	end := map[string]int64{}
	for _, iv := range byProc(ivs, c.name) {
		end[iv.id] = iv.to
	}
	late, worst := 0, int64(0)
	for _, e := range c.history() {
		if e.Ev == evWrote && e.At > end[e.ID]+int64(time.Millisecond) {
			late++
			worst = max(worst, e.At-end[e.ID])
		}
	}
	r.expect(late == 0, chkWritesValid, "%s wrote %d times after its lease's end, up to %.1f ms after", c.name, late, ms(worst))
}
