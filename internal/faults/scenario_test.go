package faults

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// scenario is one row of RELIABILITY.md: a fault, run a few times, and what must hold.
type scenario struct {
	name    string
	fault   string   // what is done
	asserts string   // what must hold
	checks  []string // the checks it reports violations of
	runs    int
	figure  figure
	run     func(r *run)
	limit   time.Duration // bounds each run; runLimit if 0
}

// figure is a scenario's headline measurement: each run reports a value, the table shows
// the worst one.
type figure struct {
	format string // with one verb for the value
	worse  func(a, b float64) float64
}

func worstMax(a, b float64) float64 { return max(a, b) }
func worstMin(a, b float64) float64 { return min(a, b) }

// runLimit bounds a run: one still going then has hung.
const runLimit = time.Minute

// run is one run of a scenario. Violations are recorded, not fatal: the run goes on and
// every check reports. A broken harness (a server that does not start, an agent that
// dies unasked) is fatal: the run has no verdict.
type run struct {
	t        *testing.T
	ctx      context.Context // ends at runLimit
	mutation string          // "" in a normal run
	index    int             // which of the scenario's runs, from 0
	start    time.Time

	mu         sync.Mutex
	violations []violation
	values     []float64
	notes      []string
	randoms    []RandomRun // the random scenario's record of each seed
	fatal      string
}

type violation struct {
	check string
	msg   string
}

// violate records that check failed.
func (r *run) violate(check, format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.violations = append(r.violations, violation{check, msg})
	r.mu.Unlock()
	r.t.Logf("violation of %s: %s", check, msg)
}

// expect records a violation of check unless ok.
func (r *run) expect(ok bool, check, format string, args ...any) {
	if !ok {
		r.violate(check, format, args...)
	}
}

// value reports the run's figure.
func (r *run) value(v float64) {
	r.mu.Lock()
	r.values = append(r.values, v)
	r.mu.Unlock()
}

// note records something worth telling that is not a violation.
func (r *run) note(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.notes = append(r.notes, msg)
	r.mu.Unlock()
	r.t.Log(msg)
}

// fatalf ends the run without a verdict.
func (r *run) fatalf(format string, args ...any) {
	r.t.Helper()
	msg := fmt.Sprintf(format, args...)
	r.mu.Lock()
	if r.fatal == "" {
		r.fatal = msg
	}
	r.mu.Unlock()
	r.t.Fatal(msg)
}

// step logs a step of the run with the time since it began, for reading a run's log.
func (r *run) step(format string, args ...any) {
	r.t.Logf("%+.3fs %s", time.Since(r.start).Seconds(), fmt.Sprintf(format, args...))
}

// mutated reports whether this run breaks the named property on purpose.
func (r *run) mutated(name string) bool { return r.mutation == name }

// sleep waits d, or until the run's limit.
func (r *run) sleep(d time.Duration) {
	select {
	case <-time.After(d):
	case <-r.ctx.Done():
	}
}

// outcome is what the runs of a scenario found.
type outcome struct {
	runs       int
	violations []violation
	values     []float64
	notes      []string
	randoms    []RandomRun
	fatal      string
}

// runScenario runs sc n times, each as a subtest whose cleanup stops its processes.
func runScenario(t *testing.T, sc scenario, n int, mutation string) outcome {
	var o outcome
	for i := range n {
		r := &run{mutation: mutation, index: i}
		ok := t.Run(fmt.Sprintf("run%d", i+1), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(sc.limit, runLimit))
			defer cancel()
			r.t, r.ctx, r.start = t, ctx, time.Now()
			sc.run(r)
		})
		o.violations = append(o.violations, r.violations...)
		o.values = append(o.values, r.values...)
		o.notes = append(o.notes, r.notes...)
		o.randoms = append(o.randoms, r.randoms...)
		if !ok && r.fatal == "" {
			r.fatal = "the run failed outside its checks (see the test log)"
		}
		if r.fatal != "" {
			o.fatal = r.fatal
			break
		}
		o.runs++
	}
	return o
}

// figureText renders the worst value of the runs.
func (sc scenario) figureText(values []float64) string {
	if len(values) == 0 {
		return "-"
	}
	w := values[0]
	for _, v := range values[1:] {
		w = sc.figure.worse(w, v)
	}
	return fmt.Sprintf(sc.figure.format, w)
}

// checksOf returns the distinct checks among vs, sorted.
func checksOf(vs []violation) []string {
	var names []string
	for _, v := range vs {
		names = append(names, v.check)
	}
	return slices.Sorted(slices.Values(dedupe(names)))
}
