package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os/signal"
	"slices"
	"strconv"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// benchCmd holds the flags of 'dlock bench'.
type benchCmd struct {
	sf         serverFlags
	goroutines int
	processes  int
	hold       time.Duration
	duration   time.Duration
	kind       string
	json       bool
}

func (bc *benchCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("bench")
	bc.sf.register(fs)
	fs.IntVar(&bc.goroutines, "goroutines", 8, "goroutines in all")
	fs.IntVar(&bc.processes, "processes", 2, "worker processes")
	fs.DurationVar(&bc.hold, "hold", time.Millisecond, "critical section")
	fs.DurationVar(&bc.duration, "duration", 5*time.Second, "per measurement")
	fs.StringVar(&bc.kind, "kind", "mutex", "mutex or fair")
	fs.BoolVarP(&bc.json, "json", "j", false, "print JSON")
	return fs
}

// benchResult is the bench's output; its JSON form is part of the command's contract
// ('dlock help bench').
type benchResult struct {
	Servers     string  `json:"servers"`
	Embedded    bool    `json:"embedded"`
	Kind        string  `json:"kind"`
	Goroutines  int     `json:"goroutines"`
	Processes   int     `json:"processes"`
	HoldMS      float64 `json:"hold_ms"`
	DurationMS  float64 `json:"duration_ms"`
	Uncontended struct {
		Ops       int64   `json:"ops"`
		OpsPerSec float64 `json:"ops_per_sec"`
	} `json:"uncontended"`
	Contended struct {
		Handoffs       int64    `json:"handoffs"`
		HandoffsPerSec float64  `json:"handoffs_per_sec"`
		WaitP50MS      float64  `json:"wait_p50_ms"`
		WaitP99MS      float64  `json:"wait_p99_ms"`
		WaitMaxMS      float64  `json:"wait_max_ms"`
		Utilisation    float64  `json:"utilisation"`
		Histogram      []bucket `json:"histogram"`
	} `json:"contended"`
	Errors   int64  `json:"errors"`
	FirstErr string `json:"first_error,omitempty"`
}

func cmdBench(c *cli, args []string) error {
	bc := new(benchCmd)
	pos, rest, _, err := parseArgs(bc.flagSet(), "bench", args, 0)
	if err != nil {
		return err
	}
	switch {
	case len(pos)+len(rest) > 0:
		return usage("bench", "the bench takes no arguments, only flags")
	case bc.kind != "mutex" && bc.kind != "fair":
		return usage("bench", "--kind %q is not a lock kind that bench measures: use mutex or fair", bc.kind)
	case bc.goroutines < 1 || bc.goroutines > 10000:
		return usage("bench", "--goroutines must be between 1 and 10000, not %d", bc.goroutines)
	case bc.processes < 1 || bc.processes > 64:
		return usage("bench", "--processes must be between 1 and 64, not %d", bc.processes)
	case bc.processes > bc.goroutines:
		return usage("bench", "--processes %d is more than --goroutines %d: every process needs a goroutine", bc.processes, bc.goroutines)
	case bc.hold < 0:
		return usage("bench", "--hold must not be negative")
	case bc.duration < 50*time.Millisecond || bc.duration > time.Hour:
		return usage("bench", "--duration must be between 50ms and 1h, not %v", bc.duration)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	res := benchResult{Kind: bc.kind, Goroutines: bc.goroutines, Processes: bc.processes, HoldMS: ms(bc.hold), DurationMS: ms(bc.duration)}
	urls := bc.sf.urls(c, "")
	if len(urls) == 0 {
		mr, url, err := startEmbedded()
		if err != nil {
			return err
		}
		defer mr.Close()
		urls, bc.sf.cluster, res.Embedded = []string{url}, false, true
	}
	srv, err := parseServers(urls, bc.sf.cluster, bc.sf.tls, c.red)
	if err != nil {
		return usage("bench", "%v", err)
	}
	if bc.kind == "fair" && srv.quorum() {
		return usage("bench", "--kind fair needs one Redis deployment (a server or a Cluster): the independent servers of a quorum cannot agree on one queue order")
	}
	res.Servers = srv.describe()
	if res.Embedded {
		res.Servers = "an embedded Redis (miniredis)"
	}
	d := srv.open()
	defer d.Close()
	if err := d.check(ctx, func(msg string) { fmt.Fprintf(c.stderr, "dlock bench: %s\n", msg) }); err != nil {
		return err
	}

	run := newRunID()
	defer bc.cleanup(d, run)
	prog := &progress{w: c.stderr, tty: isTerminal(c.stderrFile) && !bc.json}
	if !prog.tty {
		prog.w = discardWriter{}
	}
	free, err := bc.phase(ctx, prog, srv.urls, run, "free", "(a) uncontended Lock+Unlock")
	if err != nil {
		return err
	}
	hot, err := bc.phase(ctx, prog, srv.urls, run, "hot", "(b) hand-offs on one hot lock")
	if err != nil {
		return err
	}
	bc.summarise(&res, free, hot)
	if bc.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(res); err != nil {
			return err
		}
	} else {
		bc.print(c, &res, hot)
	}
	if res.Errors > 0 {
		return fail(exitFailure, "%d lock operations failed; the first: %s", res.Errors, res.FirstErr)
	}
	return nil
}

// discardWriter writes nowhere.
type discardWriter struct{}

func (discardWriter) Write(p []byte) (int, error) { return len(p), nil }

// newRunID names this run's locks, so that runs never share a lock.
func newRunID() string {
	var b [4]byte
	_, _ = crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// phaseResult merges the workers' reports of one measurement.
type phaseResult struct {
	ops     int64
	waits   []time.Duration
	held    time.Duration
	elapsed time.Duration
	errors  int64
	first   string
}

// phase runs one measurement in the worker processes and merges their reports.
func (bc *benchCmd) phase(ctx context.Context, prog *progress, urls []string, run, phase, label string) (phaseResult, error) {
	var pr phaseResult
	names := make([]string, bc.processes)
	for i := range names {
		names[i] = "bench worker " + strconv.Itoa(i+1)
	}
	args := func(i int) []string {
		g := bc.goroutines / bc.processes
		if i < bc.goroutines%bc.processes {
			g++
		}
		a := []string{benchWorkerCommand, "--phase", phase, "--goroutines", strconv.Itoa(g), "--hold", bc.hold.String(),
			"--duration", bc.duration.String(), "--run", run, "--id", strconv.Itoa(i), "--prefix", bc.sf.prefix, "--kind", bc.kind}
		if bc.sf.cluster {
			a = append(a, "--cluster")
		}
		return a
	}
	ws, err := startAll(ctx, names, args, urls)
	if err != nil {
		return pr, fail(exitFailure, "%v", err)
	}
	defer killAll(ws)
	start := time.Now()
	prog.start(label, func() string {
		return fmt.Sprintf("%v of %v", min(time.Since(start), bc.duration).Round(100*time.Millisecond), bc.duration)
	})
	defer prog.end()
	if err := goAll(ws); err != nil {
		return pr, fail(exitFailure, "%v", err)
	}
	wctx, cancel := context.WithTimeout(ctx, bc.duration+workerStartTimeout)
	defer cancel()
	for _, w := range ws {
		line, err := w.expect(wctx, "done")
		if err != nil {
			return pr, fail(exitFailure, "%v", err)
		}
		var r benchReport
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return pr, fail(exitFailure, "%s sent a report that is not JSON: %v", w.name, err)
		}
		pr.ops += r.Ops
		pr.held += time.Duration(r.HeldNS)
		pr.elapsed = max(pr.elapsed, time.Duration(r.ElapsedNS))
		pr.errors += r.Errors
		if pr.first == "" {
			pr.first = r.FirstErr
		}
		for _, us := range r.WaitsUS {
			pr.waits = append(pr.waits, time.Duration(us)*time.Microsecond)
		}
	}
	return pr, nil
}

// summarise fills in the results from the two measurements.
func (bc *benchCmd) summarise(res *benchResult, free, hot phaseResult) {
	perSec := func(n int64, d time.Duration) float64 {
		if d <= 0 {
			return 0
		}
		return float64(n) / d.Seconds()
	}
	res.Uncontended.Ops = free.ops
	res.Uncontended.OpsPerSec = perSec(free.ops, free.elapsed)
	c := &res.Contended
	c.Handoffs = hot.ops
	c.HandoffsPerSec = perSec(hot.ops, hot.elapsed)
	slices.Sort(hot.waits)
	c.WaitP50MS = ms(percentile(hot.waits, 50))
	c.WaitP99MS = ms(percentile(hot.waits, 99))
	c.WaitMaxMS = ms(percentile(hot.waits, 100))
	if hot.elapsed > 0 {
		c.Utilisation = float64(hot.held) / float64(hot.elapsed)
	}
	c.Histogram = histogram(hot.waits)
	if c.Histogram == nil {
		c.Histogram = []bucket{}
	}
	res.Errors = free.errors + hot.errors
	res.FirstErr = free.first
	if res.FirstErr == "" {
		res.FirstErr = hot.first
	}
}

// print writes the results as text.
func (bc *benchCmd) print(c *cli, res *benchResult, hot phaseResult) {
	w := c.stdout
	fmt.Fprintf(w, "dlock bench: %s on %s\n", res.Kind, res.Servers)
	fmt.Fprintf(w, "%d goroutines in %d processes, critical section %v, %v per measurement\n", res.Goroutines, res.Processes, bc.hold, bc.duration)
	if res.Embedded {
		fmt.Fprintln(w, "Note: on an embedded Redis (miniredis) these numbers are not representative of a real server.")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "(a) uncontended Lock+Unlock, each goroutine its own lock: %8.0f /s  (%d in all)\n", res.Uncontended.OpsPerSec, res.Uncontended.Ops)
	fmt.Fprintf(w, "(b) hand-offs on one hot lock:                            %8.0f /s  (%d in all)\n", res.Contended.HandoffsPerSec, res.Contended.Handoffs)
	fmt.Fprintf(w, "    wait before each acquisition: p50 %v, p99 %v, max %v\n",
		fmtMS(res.Contended.WaitP50MS), fmtMS(res.Contended.WaitP99MS), fmtMS(res.Contended.WaitMaxMS))
	fmt.Fprintf(w, "    lock utilisation: %.0f%% (hold times summed over the wall time)\n", 100*res.Contended.Utilisation)
	if len(res.Contended.Histogram) > 0 {
		fmt.Fprintln(w, "\nwaits before acquisition (log-scale buckets):")
		printHistogram(w, res.Contended.Histogram, 40)
	}
}

// fmtMS shows float milliseconds as a rounded duration.
func fmtMS(v float64) string {
	d := time.Duration(v * float64(time.Millisecond))
	switch {
	case d >= time.Second:
		d = d.Round(10 * time.Millisecond)
	case d >= time.Millisecond:
		d = d.Round(10 * time.Microsecond)
	default:
		d = d.Round(time.Microsecond)
	}
	return d.String()
}

// cleanup deletes the fencing counters of this run's locks: their names are never used
// again, so their tokens need not keep growing. The lock keys are released already.
func (bc *benchCmd) cleanup(d *deployment, run string) {
	ctx, cancel := context.WithTimeout(context.Background(), checkTimeout)
	defer cancel()
	names := []string{benchHotName(run)}
	for i := range bc.processes {
		for g := range bc.goroutines/bc.processes + 1 {
			names = append(names, fmt.Sprintf("bench:%s:free:%d:%d", run, i, g))
		}
	}
	for _, name := range names {
		k, err := keyspace.For(bc.sf.prefix, name)
		if err != nil {
			continue
		}
		for _, n := range d.nodes {
			_ = n.rdb.Del(ctx, k.Fence).Err()
		}
	}
}
