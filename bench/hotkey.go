package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"os/exec"
	"slices"
	"sync"
	"time"
)

// workerEnv makes the binary a hot-key worker: its value is the worker's JSON config.
const workerEnv = "DLOCK_BENCH_WORKER"

// grace is how long a wait may go on after the end of the run before it is given up
// (and counted as censored: it never got the lock).
const grace = 3 * time.Second

type workerConfig struct {
	Lib        string        `json:"lib"`
	Addr       string        `json:"addr"`
	Key        string        `json:"key"`
	Worker     int           `json:"worker"`
	Goroutines int           `json:"goroutines"`
	Hold       time.Duration `json:"hold"`
	TTL        time.Duration `json:"ttl"`
}

// workerStart is the parent's go: the wall-clock start and end of the run.
type workerStart struct {
	Start int64 `json:"start"`
	End   int64 `json:"end"`
}

// workerReport is a worker's last line.
type workerReport struct {
	Ready   bool     `json:"ready,omitempty"`
	Samples []sample `json:"samples,omitempty"`
	// CPUNanos is the worker's CPU time from the start line to its last Unlock: the
	// library's and the loop's, without the process's start and warm-up.
	CPUNanos int64    `json:"cpu_ns,omitempty"`
	Errors   []string `json:"errors,omitempty"`
}

// workerMain runs one hot-key worker: cfg.Goroutines goroutines that Lock the key, hold
// it for cfg.Hold (time.Sleep) and Unlock, from the start to the end the parent sends on
// stdin; then it prints every sample as one JSON line on stdout.
func workerMain(spec string, stdin io.Reader, stdout io.Writer) error {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		return fmt.Errorf("worker config: %w", err)
	}
	s, err := open(cfg.Lib, openOpts{Addrs: []string{cfg.Addr}, TTL: cfg.TTL})
	if err != nil {
		return err
	}
	defer s.Close()
	lockers := make([]locker, cfg.Goroutines)
	var wg sync.WaitGroup
	warm := make([]error, cfg.Goroutines)
	for g := range lockers {
		lockers[g] = s.Locker(cfg.Key)
		wg.Go(func() { // connections and scripts, on keys of their own
			warm[g] = lockUnlockTimeout(s.Locker(fmt.Sprintf("%s:warm:%d:%d", cfg.Key, cfg.Worker, g)))
		})
	}
	wg.Wait()
	if err := errors.Join(warm...); err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(workerReport{Ready: true}); err != nil {
		return err
	}
	var go_ workerStart
	line, err := bufio.NewReader(stdin).ReadBytes('\n')
	if err != nil {
		return fmt.Errorf("waiting for the start: %w", err)
	}
	if err := json.Unmarshal(line, &go_); err != nil {
		return fmt.Errorf("start line %q: %w", line, err)
	}
	start, end := time.Unix(0, go_.Start), time.Unix(0, go_.End)
	cpu0, _ := selfCPU()
	ctx, cancel := context.WithDeadline(context.Background(), end.Add(grace))
	defer cancel()

	var mu sync.Mutex
	var all []sample
	var errs []string
	for g, lk := range lockers {
		id := cfg.Worker*cfg.Goroutines + g
		wg.Go(func() {
			var mine []sample
			var myErrs []string
			time.Sleep(time.Until(start))
			for time.Now().Before(end) {
				req := time.Now()
				if err := lk.Lock(ctx); err != nil {
					mine = append(mine, sample{G: id, Req: req.UnixNano()})
					if ctx.Err() == nil {
						myErrs = append(myErrs, "lock: "+err.Error())
					}
					break
				}
				acq := time.Now()
				time.Sleep(cfg.Hold)
				rel := time.Now()
				uctx, ucancel := context.WithTimeout(context.Background(), opTimeout)
				if err := lk.Unlock(uctx); err != nil {
					myErrs = append(myErrs, "unlock: "+err.Error())
				}
				ucancel()
				mine = append(mine, sample{G: id, Req: req.UnixNano(), Acq: acq.UnixNano(), Rel: rel.UnixNano()})
			}
			mu.Lock()
			all = append(all, mine...)
			errs = append(errs, myErrs...)
			mu.Unlock()
		})
	}
	wg.Wait()
	cpu1, _ := selfCPU()
	if len(errs) > 10 {
		errs = append(errs[:10], fmt.Sprintf("... and %d more", len(errs)-10))
	}
	return enc.Encode(workerReport{Samples: all, Errors: errs, CPUNanos: int64(cpu1 - cpu0)})
}

// hotShape returns how many worker processes a hot-key scenario runs, and how many
// goroutines each: cfg.HotWorkers of cfg.HotGoroutines, or all those goroutines in one
// process (hotkey-1proc, fair-1proc).
func (c benchConfig) hotShape(sc string) (workers, goroutines int) {
	if isOneProc(sc) {
		return 1, c.HotWorkers * c.HotGoroutines
	}
	return c.HotWorkers, c.HotGoroutines
}

// hotKey runs the worker processes of hotShape on one key, for --duration.
func (b *bench) hotKey(sc, lib string, run int) *result {
	res := newResult(sc, lib, run)
	n, per := b.cfg.hotShape(sc)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second+b.cfg.Duration+grace)
	defer cancel()
	type worker struct {
		cmd   *exec.Cmd
		stdin io.WriteCloser
		out   *bufio.Scanner
	}
	workers := make([]*worker, n)
	defer func() {
		for _, w := range workers {
			if w != nil && w.cmd.Process != nil && w.cmd.ProcessState == nil {
				_ = w.cmd.Process.Kill()
				_ = w.cmd.Wait()
			}
		}
	}()
	key := fmt.Sprintf("hot:%s:%d", lib, run)
	for i := range workers {
		spec, _ := json.Marshal(workerConfig{Lib: lib, Addr: b.single.Addr, Key: key, Worker: i,
			Goroutines: per, Hold: b.cfg.Hold, TTL: b.cfg.TTL})
		cmd := exec.CommandContext(ctx, b.self, "-test.run=^$") // the flag: for a test binary
		cmd.Env = append(os.Environ(), workerEnv+"="+string(spec))
		cmd.Stderr = os.Stderr
		cmd.SysProcAttr = sysProcAttr()
		stdin, err := cmd.StdinPipe()
		if err != nil {
			return res.fail(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			return res.fail(err)
		}
		if err := cmd.Start(); err != nil {
			return res.fail(fmt.Errorf("start worker: %w", err))
		}
		sc := bufio.NewScanner(stdout)
		sc.Buffer(make([]byte, 1<<20), 1<<28)
		workers[i] = &worker{cmd: cmd, stdin: stdin, out: sc}
	}
	readReport := func(w *worker) (workerReport, error) {
		var r workerReport
		if !w.out.Scan() {
			err := w.out.Err()
			if err == nil {
				err = io.ErrUnexpectedEOF
			}
			return r, fmt.Errorf("worker %d: no report: %w (exit: %v)", w.cmd.Process.Pid, err, w.cmd.Wait())
		}
		return r, json.Unmarshal(w.out.Bytes(), &r)
	}
	for _, w := range workers {
		if r, err := readReport(w); err != nil || !r.Ready {
			return res.fail(fmt.Errorf("worker not ready: %v", err))
		}
	}
	start := time.Now().Add(100 * time.Millisecond)
	end := start.Add(b.cfg.Duration)
	goLine, _ := json.Marshal(workerStart{Start: start.UnixNano(), End: end.UnixNano()})
	srv0 := b.serverSnapshot()
	for _, w := range workers {
		if _, err := w.stdin.Write(append(goLine, '\n')); err != nil {
			return res.fail(err)
		}
		w.stdin.Close()
	}
	var samples []sample
	var errs []string
	var clientCPU time.Duration
	for _, w := range workers {
		r, err := readReport(w)
		if err != nil {
			return res.fail(err)
		}
		if err := w.cmd.Wait(); err != nil {
			return res.fail(fmt.Errorf("worker: %w", err))
		}
		samples = append(samples, r.Samples...)
		errs = append(errs, r.Errors...)
		clientCPU += time.Duration(r.CPUNanos)
	}
	perGrant(res, srv0, b.serverSnapshot(), clientCPU, samples)
	if len(errs) > 0 {
		res.Err = fmt.Sprintf("%d errors, first: %s", len(errs), errs[0])
	}
	warmup := min(b.cfg.Duration/10, 500*time.Millisecond)
	hotMetrics(res, samples, start.Add(warmup), end, n*per, per)
	noneGranted(res)
	// Σ hold ÷ wall rewards a library that slows its holders' sleeps down by keeping the
	// CPUs busy; the grants at the nominal hold do not.
	res.Metrics["nominal_utilisation"] = res.Metrics["grants_per_s"] * b.cfg.Hold.Seconds()
	res.Samples = samples
	return res
}

// noneGranted fails a run in which no request of the window was granted: its waits,
// grants/s and utilisation would read 0 as if measured. A failed run is left out of the
// medians, and the report lists it with its error.
func noneGranted(res *result) {
	if res.Metrics["samples"] == 0 && res.Err == "" {
		res.Err = "no grant fell in the measured window"
	}
}

// hotMetrics computes the hot-key metrics over the window [from, to): samples whose
// request falls in it count for waits and order; holds count for utilisation in so far
// as they overlap it.
//
// perProcess is the number of goroutines of one worker process: goroutine g runs in
// process g / perProcess, which tells a hand-off within a process from one between two.
func hotMetrics(res *result, samples []sample, from, to time.Time, goroutines, perProcess int) {
	f, t := from.UnixNano(), to.UnixNano()
	window := float64(t - f)
	var held float64
	var waits []float64 // ms
	var censored int
	var maxCensored float64
	grants := make([]int, goroutines)
	var holdSum float64
	var holds int
	for _, s := range samples {
		if s.Acq != 0 {
			lo, hi := max(s.Acq, f), min(s.Rel, t)
			if hi > lo {
				held += float64(hi - lo)
			}
			if s.Acq >= f && s.Acq < t && s.G < goroutines {
				grants[s.G]++
			}
			holdSum += float64(s.Rel - s.Acq)
			holds++
		}
		if s.Req < f || s.Req >= t {
			continue
		}
		if s.Acq == 0 {
			censored++
			maxCensored = max(maxCensored, float64(to.Add(grace).UnixNano()-s.Req)/1e6)
			continue
		}
		waits = append(waits, float64(s.Acq-s.Req)/1e6)
	}
	slices.Sort(waits)
	m := res.Metrics
	m["utilisation"] = held / window
	m["wait_p50_ms"] = quantile(waits, 0.50)
	m["wait_p90_ms"] = quantile(waits, 0.90)
	m["wait_p99_ms"] = quantile(waits, 0.99)
	m["wait_max_ms"] = max(quantile(waits, 1), maxCensored)
	m["censored"] = float64(censored)
	m["grants_per_s"] = float64(len(waits)) / (window / 1e9)
	m["samples"] = float64(len(waits))
	if holds > 0 {
		m["hold_mean_ms"] = holdSum / float64(holds) / 1e6
	}
	total, least, starved := 0, math.MaxInt, 0
	for _, g := range grants {
		total += g
		least = min(least, g)
		if g == 0 {
			starved++
		}
	}
	if total > 0 {
		m["min_share"] = float64(least) / (float64(total) / float64(goroutines))
	}
	m["starved_goroutines"] = float64(starved)
	m["overlaps"] = float64(overlaps(samples))
	h := handoffs(samples, f, t, perProcess)
	m["handoff_p50_us"] = h.all
	m["handoff_local_p50_us"] = h.local
	m["handoff_cross_p50_us"] = h.cross
	m["handoff_cross_share"] = h.crossShare
	m["regrant_same_goroutine"] = h.regrant
	ooo, ooo1 := outOfOrder(samples, f, t)
	m["out_of_order"] = ooo
	m["out_of_order_1ms"] = ooo1
}

// outOfOrder returns the fraction of grants (of requests made in [f, t)) given while a
// request made earlier was still waiting: grants out of request order. The second value
// counts only those that overtook a request at least 1 ms older.
func outOfOrder(samples []sample, f, t int64) (float64, float64) {
	s := slices.Clone(samples)
	acq := func(x sample) int64 {
		if x.Acq == 0 {
			return math.MaxInt64 // never granted: waiting until the end
		}
		return x.Acq
	}
	slices.SortFunc(s, func(a, b sample) int {
		if c := cmpInt(acq(a), acq(b)); c != 0 {
			return c
		}
		return cmpInt(a.Req, b.Req)
	})
	// suffix[i]: the earliest request among the grants after i.
	suffix := make([]int64, len(s)+1)
	suffix[len(s)] = math.MaxInt64
	for i := len(s) - 1; i >= 0; i-- {
		suffix[i] = min(suffix[i+1], s[i].Req)
	}
	var n, out, out1 int
	for i, x := range s {
		if x.Acq == 0 || x.Req < f || x.Req >= t {
			continue
		}
		n++
		if suffix[i+1] < x.Req {
			out++
		}
		if suffix[i+1] < x.Req-int64(time.Millisecond) {
			out1++
		}
	}
	if n == 0 {
		return 0, 0
	}
	return float64(out) / float64(n), float64(out1) / float64(n)
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// overlaps counts holds that began before the previous hold ended: two holders at once.
// The timestamps come from one clock, and a grant follows the release it waited for
// through Redis, so any overlap is a real breach of mutual exclusion.
func overlaps(samples []sample) int {
	var held []sample
	for _, s := range samples {
		if s.Acq != 0 {
			held = append(held, s)
		}
	}
	slices.SortFunc(held, func(a, b sample) int { return cmpInt(a.Acq, b.Acq) })
	n := 0
	var end int64
	for i, s := range held {
		if i > 0 && s.Acq < end {
			n++
		}
		end = max(end, s.Rel)
	}
	return n
}

// handoffStats describes the hand-offs between consecutive grants: medians in µs of the
// time from the previous holder's Unlock call to the next grant, over all of them, those
// within one process and those between two (0 where there were none); the share of
// hand-offs between processes; and the share of grants that went straight back to the
// goroutine that had just released (barging: the others were already waiting).
type handoffStats struct {
	all, local, cross   float64
	crossShare, regrant float64
}

// handoffs looks at consecutive grants in [f, t); goroutine g runs in process g/perProcess.
func handoffs(samples []sample, f, t int64, perProcess int) handoffStats {
	var held []sample
	for _, s := range samples {
		if s.Acq >= f && s.Acq < t {
			held = append(held, s)
		}
	}
	if len(held) < 2 {
		return handoffStats{}
	}
	perProcess = max(perProcess, 1)
	slices.SortFunc(held, func(a, b sample) int { return cmpInt(a.Acq, b.Acq) })
	var all, local, cross []float64
	same := 0
	for i := 1; i < len(held); i++ {
		gap := float64(held[i].Acq-held[i-1].Rel) / 1e3
		all = append(all, gap)
		if held[i].G/perProcess == held[i-1].G/perProcess {
			local = append(local, gap)
		} else {
			cross = append(cross, gap)
		}
		if held[i].G == held[i-1].G {
			same++
		}
	}
	for _, x := range [][]float64{all, local, cross} {
		slices.Sort(x)
	}
	return handoffStats{
		all:        quantile(all, 0.5),
		local:      quantile(local, 0.5),
		cross:      quantile(cross, 0.5),
		crossShare: float64(len(cross)) / float64(len(all)),
		regrant:    float64(same) / float64(len(all)),
	}
}
