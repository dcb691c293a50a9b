package faults

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/seed51c676c8/dlock/internal/lateproxy"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// The random scenario's shape and bounds.
const (
	rndOneProcs    = 3 // processes on the single server
	rndQuorumProcs = 2 // processes on the quorum of 3
	rndWorkers     = 3 // goroutines per process
	// rndFreeBound is how long a lock may be free while someone waits, outside faults: a
	// waiter wakes within a round trip of a release (dlock notifies) or of an expiry (the
	// acquire script says when), and a loaded machine of 2 CPUs adds scheduling delays.
	rndFreeBound = 500 * time.Millisecond
	// rndAfterglow is how long a fault may keep a lock taken after it ended: a late
	// request whose caller gave up may take a free lock, or queue a waiter that is gone,
	// when it lands; the queue entry lasts the waiter TTL (3s), the lock its lease's TTL
	// (at most rndMaxExtend); a paused process's grants and entries likewise.
	rndAfterglow = rndMaxExtend + 3*time.Second + 500*time.Millisecond
)

// rndOneSpecs are the locks of the single server: every kind, Mutex through handles of
// three TTLs (one without renewal) on two names that a MultiMutex takes together.
var rndOneSpecs = []rndSpec{
	{Kind: "mutex", Names: []string{"m1"}, TTL: 400 * time.Millisecond, NoRenew: true},
	{Kind: "mutex", Names: []string{"m1"}, TTL: 1200 * time.Millisecond},
	{Kind: "mutex", Names: []string{"m2"}, TTL: 800 * time.Millisecond},
	{Kind: "multi", Names: []string{"m1", "m2"}, TTL: time.Second},
	{Kind: "fair", Names: []string{"f"}, TTL: time.Second},
	{Kind: "read", Names: []string{"rw"}, TTL: time.Second},
	{Kind: "write", Names: []string{"rw"}, TTL: 700 * time.Millisecond},
	{Kind: "sem", Names: []string{"s"}, TTL: time.Second, Size: 2},
	{Kind: "ts", Names: []string{"t"}, TTL: time.Second},
}

// rndQuorumSpecs are the locks of the quorum: the kinds it supports (FairMutex and
// TimestampMutex refuse a quorum).
var rndQuorumSpecs = []rndSpec{
	{Kind: "mutex", Names: []string{"q1"}, TTL: 500 * time.Millisecond, NoRenew: true},
	{Kind: "mutex", Names: []string{"q1"}, TTL: 1500 * time.Millisecond},
	{Kind: "mutex", Names: []string{"q2"}, TTL: time.Second},
	{Kind: "multi", Names: []string{"q1", "q2"}, TTL: time.Second},
	{Kind: "read", Names: []string{"qrw"}, TTL: time.Second},
	{Kind: "write", Names: []string{"qrw"}, TTL: time.Second},
	{Kind: "sem", Names: []string{"qs"}, TTL: time.Second, Size: 2},
}

// randomRun runs one seed: the workload on both deployments through late proxies, the
// injector, then the check of every process's log.
func randomRun(r *run) {
	seed, dur := rndCfg.seedFor(r)
	r.step("seed %d for %v (replay: DLOCK_FAULTS_SEED=%d)", seed, dur, seed)
	one, quorum := redistest.StartNodes(r.t, 1), redistest.StartNodes(r.t, 3)
	var targets []*rndTarget
	for i := range rndOneProcs {
		targets = append(targets, rndSpawn(r, fmt.Sprintf("P%d", i+1), "one", one, rndOneSpecs))
	}
	for i := range rndQuorumProcs {
		targets = append(targets, rndSpawn(r, fmt.Sprintf("Q%d", i+1), "quorum", quorum, rndQuorumSpecs))
	}
	start := time.Now()
	for i, t := range targets {
		t.c.send(command{Op: "random", ID: "rnd", Seed: int64(seed)*100 + int64(i), Wait: dur, N: rndWorkers, Specs: t.specs})
	}
	in := &injector{r: r, rng: rngFor(seed), targets: targets}
	in.run(start.Add(dur))
	ops := map[string]int64{}
	for _, t := range targets {
		done, ok := t.c.awaitWithin(dur+30*time.Second, func(e event) bool { return e.ID == "rnd" && e.Ev == evDone })
		if !ok {
			r.fatalf("agent %s: the workload did not end%s", t.c.name, t.c.stderrTail())
		}
		for k, v := range done.Counts {
			ops[k] += v
		}
	}
	var events []event
	for _, t := range targets {
		t.c.finish()
		events = append(events, t.c.history()...)
	}
	end := time.Now()
	left := rndLeftovers(r, map[string][]*redistest.Server{"one": one, "quorum": quorum}, end.Add(rndAfterglow))
	log := rndLogOf(events, in.faults, start.UnixNano(), end.UnixNano())
	log.left, log.scopes = left, rndScopes()
	rndDump(r, seed, events, log)
	rndReport(r, seed, dur, log, ops, in.counts())
}

// rndSpawn starts an agent that reaches each of nodes through a late proxy of its own.
func rndSpawn(r *run, name, scope string, nodes []*redistest.Server, specs []rndSpec) *rndTarget {
	t := &rndTarget{scope: scope, specs: specs}
	var addrs []string
	for _, s := range nodes {
		p := lateproxy.New(r.t, s.Addr)
		t.proxies = append(t.proxies, p)
		addrs = append(addrs, p.Addr)
	}
	t.c = spawn(r, agentConfig{Name: name, Nodes: addrs, Store: nodes[0].Addr, Unsure: true})
	return t
}

// rndScopes maps each lock name to its deployment.
func rndScopes() map[string]string {
	out := map[string]string{}
	for scope, specs := range map[string][]rndSpec{"one": rndOneSpecs, "quorum": rndQuorumSpecs} {
		for _, s := range specs {
			for _, n := range s.Names {
				out[n] = scope
			}
		}
	}
	return out
}

// rndReport runs the checker and records what it found, the figure and the seed's row.
func rndReport(r *run, seed uint64, dur time.Duration, log rndLog, ops map[string]int64, faults map[string]int) {
	res := checkRandom(log, rndBounds{free: rndFreeBound, afterglow: rndAfterglow})
	for _, v := range res.violations {
		r.violate(v.check, "seed %d: %s", seed, v.msg)
	}
	free := ms(res.longestFree.len())
	r.value(free)
	row := RandomRun{Seed: seed, Seconds: dur.Seconds(), Operations: ops, Faults: faults,
		LongestFree: free, FreeName: res.freeName, Violations: len(res.violations), Quiet: map[string]float64{}}
	for k, v := range res.quiet {
		row.Quiet[k] = v.Seconds()
	}
	if len(res.violations) > 0 {
		row.First = res.violations[0].check + ": " + res.violations[0].msg
	}
	r.note("seed %d: %d holds, operations %s; faults %s; longest free time outside faults %.0f ms (%q); outside faults: %s of %.0f s",
		seed, len(log.holds), countList(ops), countList(faults), free, res.freeName, quietText(res.quiet), ms(log.end-log.start)/1e3)
	if r.mutation == "" {
		r.mu.Lock()
		r.randoms = append(r.randoms, row)
		r.mu.Unlock()
	}
}

// countList renders counts by kind, in order of kind.
func countList[V int | int64](m map[string]V) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return strings.Join(parts, ", ")
}

func quietText(q map[string]time.Duration) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(q)) {
		parts = append(parts, fmt.Sprintf("%s %.1f s", k, q[k].Seconds()))
	}
	return strings.Join(parts, ", ")
}
