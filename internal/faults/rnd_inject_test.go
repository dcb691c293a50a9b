package faults

import (
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock/internal/lateproxy"
)

// rndTarget is one agent of the random scenario and the proxies it reaches its
// deployment through, one per node.
type rndTarget struct {
	c       *child
	scope   string // its deployment: faults on it excuse only that deployment's locks
	proxies []*lateproxy.Proxy
	specs   []rndSpec
}

// injector makes the random scenario's faults, drawn from its own generator, and logs
// each with the time it was active.
type injector struct {
	r       *run
	rng     *rand.Rand
	rngMu   sync.Mutex
	targets []*rndTarget
	wg      sync.WaitGroup

	mu     sync.Mutex
	faults []rndFault
}

// Fault kinds.
const (
	fHold      = "hold"      // requests held back, delivered late
	fDuplicate = "duplicate" // held back, delivered late and again on a fresh connection
	fDelay     = "delay"     // replies delayed
	fCut       = "cut"       // connections cut
	fPause     = "pause"     // the process stopped (SIGSTOP)
)

// run alternates quiet stretches (3–6s at first, then 6–9s: the free-time check needs
// time with no fault or afterglow) with bursts of 3–5s in which a fault starts every
// 100–400ms, until until; it returns once every fault has ended.
func (in *injector) run(until time.Time) {
	quiet := [2]int{3000, 6000}
	for {
		in.r.sleep(in.between(quiet[0], quiet[1]))
		quiet = [2]int{6000, 9000}
		burst := time.Now().Add(in.between(3000, 5000))
		if burst.After(until) {
			break
		}
		for time.Now().Before(burst) && in.r.ctx.Err() == nil {
			in.wg.Go(in.one())
			in.r.sleep(in.between(100, 400))
		}
	}
	in.wg.Wait()
}

// between draws a duration in [lo, hi) milliseconds.
func (in *injector) between(lo, hi int) time.Duration {
	in.rngMu.Lock()
	defer in.rngMu.Unlock()
	return time.Duration(lo+in.rng.IntN(hi-lo)) * time.Millisecond
}

func (in *injector) intn(n int) int {
	in.rngMu.Lock()
	defer in.rngMu.Unlock()
	return in.rng.IntN(n)
}

// one draws a fault and its target now, and returns what makes it and ends it.
func (in *injector) one() func() {
	t := in.targets[in.intn(len(in.targets))]
	pi := in.intn(len(t.proxies))
	p := t.proxies[pi]
	where := fmt.Sprintf("%s→node%d", t.c.name, pi+1)
	switch k := in.intn(20); {
	case k < 7:
		return func() { in.hold(t, where, p, false) }
	case k < 12:
		return func() { in.hold(t, where, p, true) }
	case k < 15:
		return func() { in.delay(t, where, p) }
	case k < 17:
		return func() { in.cut(t, where, p) }
	}
	return func() { in.pause(t) }
}

// hold holds back every request on the target's open connections for 0.5–3s (past the
// clients' 1s timeout more often than not), then delivers them, or (dup) delivers
// them and again on a fresh connection, as a resent pipeline does.
func (in *injector) hold(t *rndTarget, where string, p *lateproxy.Proxy, dup bool) {
	d := in.between(500, 3000)
	from := time.Now()
	h := p.HoldConnections()
	in.r.sleep(d)
	kind, held := fHold, h.Len()
	if dup {
		kind = fDuplicate
		h.Duplicate()
	} else {
		h.Deliver()
	}
	in.log(rndFault{kind: kind, target: where, scope: t.scope, from: from.UnixNano(), to: time.Now().UnixNano(), bytes: held})
}

// delay delays the replies to the target by 0.1–1.5s for 0.5–2s.
func (in *injector) delay(t *rndTarget, where string, p *lateproxy.Proxy) {
	d, dur := in.between(100, 1500), in.between(500, 2000)
	from := time.Now()
	p.DelayReplies(d)
	in.r.sleep(dur)
	p.DelayReplies(0)
	in.log(rndFault{kind: fDelay, target: where, scope: t.scope, from: from.UnixNano(), to: time.Now().Add(d).UnixNano()})
}

func (in *injector) cut(t *rndTarget, where string, p *lateproxy.Proxy) {
	at := time.Now().UnixNano()
	p.Cut()
	in.log(rndFault{kind: fCut, target: where, scope: t.scope, from: at, to: time.Now().UnixNano()})
}

// pause stops the target process for 0.2–2.5s (past its shortest TTLs).
func (in *injector) pause(t *rndTarget) {
	d := in.between(200, 2500)
	from := time.Now()
	t.c.pause()
	in.r.sleep(d)
	t.c.resume()
	in.log(rndFault{kind: fPause, target: t.c.name, scope: t.scope, from: from.UnixNano(), to: time.Now().UnixNano()})
}

func (in *injector) log(f rndFault) {
	in.mu.Lock()
	in.faults = append(in.faults, f)
	in.mu.Unlock()
	in.r.step("fault %s on %s for %.0f ms (%d bytes held)", f.kind, f.target, ms(f.to-f.from), f.bytes)
}

// counts returns the faults made, by kind, and as "late" the holds that held requests
// back (the others held idle connections).
func (in *injector) counts() map[string]int {
	in.mu.Lock()
	defer in.mu.Unlock()
	out := map[string]int{}
	for _, f := range in.faults {
		out[f.kind]++
		if f.bytes > 0 {
			out["late"]++
		}
	}
	return out
}
