package faults

import (
	"context"
	"time"

	"github.com/seed51c676c8/dlock/internal/faultproxy"
)

const (
	contentionTTL = 2 * time.Second
	// freeBound is how long the lock may be free while someone waits: a quarter of the
	// TTL, 2.5 times the per-node timeout (TTL/10) that a silent quorum node may cost an
	// attempt, and far more than the round trip in which a waiter should wake.
	freeBound = 500 * time.Millisecond
)

// contention: agents take one lock again and again, each with a few goroutines, while
// the fault acts; then the checks: an exact counter, no overlap, growing tokens, no
// failed call, and a lock never left free long while someone waits.
type contention struct {
	nodes      int
	procs      int
	goroutines int
	dur        time.Duration
	proxied    func(r *run, ps []*faultproxy.Proxy) // the fault on the nodes' proxies; nil: no proxies
	during     func(r *run, d *deployment, stop <-chan struct{})
}

// contentionRow makes a contention scenario's row.
func contentionRow(name, fault, asserts string, ct contention) scenario {
	return scenario{
		name: name, fault: fault, asserts: asserts, runs: 1, run: ct.run,
		checks: []string{chkCounter, chkExclusive, chkTokens, chkNoErrors, chkFreeTime},
		figure: figure{"longest free time %.0f ms (bound 500)", worstMax},
	}
}

func (ct contention) run(r *run) {
	d := deploy(r, ct.nodes)
	addrs := d.addrs()
	if ct.proxied != nil {
		ps := d.proxies(r)
		ct.proxied(r, ps)
		addrs = proxyAddrs(ps)
	}
	var agents []*child
	for i := range ct.procs {
		agents = append(agents, d.spawn(r, string(rune('A'+i)), addrs))
	}
	for _, a := range agents {
		a.send(command{Op: "contend", ID: "c", Name: "hot", TTL: contentionTTL, Wait: ct.dur, N: int64(ct.goroutines)})
	}
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		if ct.during != nil {
			ct.during(r, d, stop)
		}
	}()
	var holds, fails int64
	for _, a := range agents {
		e := a.awaitEv(evDone, "c")
		holds += e.N
		fails += e.M
		r.expect(e.M == 0 && e.Ev == evDone, chkNoErrors, "%s: %d calls failed, the first: %s", a.name, e.M, e.Err)
	}
	close(stop)
	<-done
	finishAll(agents...)
	ct.check(r, d, intervals(agents...), holds)
}

func (ct contention) check(r *run, d *deployment, ivs []interval, holds int64) {
	checkCounted(r, d, ivs, holds)
	gap, at := maxFree(ivs)
	r.value(ms(gap))
	r.expect(gap <= freeBound, chkFreeTime, "the lock was free for %.1f ms from %s while %d goroutines waited (bound %v)",
		ms(gap), clock(at), ct.procs*ct.goroutines, freeBound)
	r.note("%d holds in %v", holds, ct.dur)
}

// jitter puts 1ms ± 1ms of latency on every reply of every node: the nodes' replies
// overtake each other, and contenders split the votes.
func jitter(r *run, ps []*faultproxy.Proxy) {
	for _, p := range ps {
		p.SetJitter(r.t, time.Millisecond, time.Millisecond)
	}
}

// blackhole swallows everything to and from the first k nodes (3 under the blackhole-3
// mutation).
func blackhole(k int) func(r *run, ps []*faultproxy.Proxy) {
	return func(r *run, ps []*faultproxy.Proxy) {
		n := k // the closure is the scenario's for every run: a mutation must not change it
		if r.mutated(mutBlackhole3) {
			n = 3
		}
		for _, p := range ps[:n] {
			p.Blackhole(r.t)
		}
	}
}

// checkCounted: the counter of the lock "hot" says holds, no two holds overlap, and tokens
// grow.
func checkCounted(r *run, d *deployment, ivs []interval, holds int64) {
	counter, err := d.data.Get(context.Background(), counterKey("hot")).Int64()
	if err != nil && holds > 0 {
		r.fatalf("read the counter: %v", err)
	}
	r.expect(counter == holds, chkCounter, "the counter says %d, but there were %d holds: updates were lost", counter, holds)
	checkExclusive(r, ivs)
	checkTokens(r, ivs)
}
