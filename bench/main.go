// Command bench measures dlock against other Go lock libraries for Redis, in one run, on
// the same redis-server processes, which it starts itself on loopback ports.
//
//	go run ./bench                      # from the repository root (go.work)
//	go run ./bench --md BENCHMARKS.md --plot bench/waits.png --json bench/results/results.json
//
// Scenarios (--only, comma-separated): commands, allocs, throughput, quorum (loopback),
// quorum-lat025 and quorum-lat1 (behind a delay proxy), wakeup, hotkey, fair,
// hotkey-1proc, fair-1proc, leases. Each is repeated --runs times, the libraries in a
// rotating order, and the report gives the median of the runs and dlock's ratio to the
// best peer. See BENCHMARKS.md for what each scenario measures.
//
// Variants of dlock run only when --libs names them, and have no column in the report:
// dlock-noowner is the Mutex with WithOwner(""), to measure the owner's cost beside the
// default (go run ./bench --only commands,throughput --libs dlock,dlock-noowner --json FILE).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// benchConfig is everything that shapes the numbers.
type benchConfig struct {
	Duration      time.Duration `json:"duration"`  // hot-key run per library; throughput and quorum use half
	Runs          int           `json:"runs"`      // repetitions of each scenario; the report gives medians
	Only          []string      `json:"only"`      // scenarios to run; empty: all
	Libs          []string      `json:"libs"`      // libraries to run; empty: all
	TTL           time.Duration `json:"ttl"`       // lease length everywhere but the leases scenario
	Leases        int           `json:"leases"`    // leases held by one client
	LeaseTTL      time.Duration `json:"lease_ttl"` // their TTL
	Goroutines    int           `json:"throughput_goroutines"`
	HotWorkers    int           `json:"hot_workers"`
	HotGoroutines int           `json:"hot_goroutines_per_worker"`
	Hold          time.Duration `json:"hold"`
	AllocOps      int           `json:"alloc_ops"`
	CommandOps    int           `json:"command_ops"`
	Quiet         bool          `json:"-"`
}

func defaultConfig() benchConfig {
	return benchConfig{
		Duration: 5 * time.Second, Runs: 3, TTL: 10 * time.Second,
		Leases: 10000, LeaseTTL: 3 * time.Second,
		Goroutines: 32, HotWorkers: 4, HotGoroutines: 4, Hold: time.Millisecond,
		AllocOps: 2000, CommandOps: 200,
	}
}

// childMain runs this process as a hot-key worker, a wake-up subscriber or the delay proxy, if the
// environment says it is one, and reports whether it was.
func childMain() bool {
	var err error
	if spec := os.Getenv(workerEnv); spec != "" {
		err = workerMain(spec, os.Stdin, os.Stdout)
	} else if spec := os.Getenv(wakeEnv); spec != "" {
		err = wakeMain(spec, os.Stdout)
	} else if spec := os.Getenv(proxyEnv); spec != "" {
		err = proxyMain(spec, os.Stdin, os.Stdout)
	} else {
		return false
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench child:", err)
		os.Exit(1)
	}
	return true
}

// outputs says where to write the report.
type outputs struct {
	JSON, MD, Plot string
}

func main() {
	if childMain() {
		return
	}
	cfg := defaultConfig()
	var out outputs
	var only, libs string
	flag.DurationVar(&cfg.Duration, "duration", cfg.Duration, "hot-key run per library and run (throughput and quorum: half of it)")
	flag.IntVar(&cfg.Runs, "runs", cfg.Runs, "repeat each scenario `N` times and report the median")
	flag.StringVar(&only, "only", "", "run only these scenarios, comma-separated: "+strings.Join(scenarioOrder, ","))
	flag.StringVar(&libs, "libs", "", "run only these libraries, comma-separated: "+strings.Join(libIDs(), ","))
	flag.IntVar(&cfg.Leases, "leases", cfg.Leases, "leases held by one client in the leases scenario")
	flag.DurationVar(&cfg.LeaseTTL, "lease-ttl", cfg.LeaseTTL, "TTL of the leases in the leases scenario")
	flag.StringVar(&out.JSON, "json", "", "write every raw result to `FILE`")
	flag.StringVar(&out.MD, "md", "", "write the report to `FILE` (BENCHMARKS.md); text outside its markers is kept")
	flag.StringVar(&out.Plot, "plot", "", "draw the hot-key wait-time distributions to `FILE.png`")
	flag.BoolVar(&cfg.Quiet, "quiet", false, "no progress lines")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of this process (not the hot-key workers) to `FILE`")
	flag.Parse()
	cfg.Only, cfg.Libs = splitList(only), splitList(libs)

	var args []string
	flag.Visit(func(f *flag.Flag) { args = append(args, fmt.Sprintf("--%s=%s", f.Name, f.Value)) })
	command := strings.TrimSpace("go run ./bench " + strings.Join(args, " "))

	if *cpuProfile != "" {
		f, err := os.Create(*cpuProfile)
		if err == nil {
			err = pprof.StartCPUProfile(f)
		}
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench: --cpuprofile:", err)
			os.Exit(1)
		}
		defer func() {
			pprof.StopCPUProfile()
			f.Close()
		}()
	}
	if err := run(cfg, out, command, os.Stderr, true); err != nil {
		pprof.StopCPUProfile()
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

func splitList(s string) []string {
	var out []string
	for f := range strings.SplitSeq(s, ",") {
		if f = strings.TrimSpace(f); f != "" {
			out = append(out, f)
		}
	}
	return out
}

// libIDs lists the libraries, then the variants (run only when --libs names them).
func libIDs() []string {
	var ids []string
	for _, l := range allLibs() {
		ids = append(ids, l.ID)
	}
	return ids
}

// bench holds the servers of one run.
type bench struct {
	cfg    benchConfig
	log    io.Writer
	self   string              // this executable, re-run as hot-key workers
	single *redistest.Server   // standalone server for every scenario but quorum
	nodes  []*redistest.Server // the quorum

	adminMu sync.Mutex
	admins  map[string]*redis.Client
}

func (b *bench) admin(addr string) *redis.Client {
	b.adminMu.Lock()
	defer b.adminMu.Unlock()
	c := b.admins[addr]
	if c == nil {
		c = redis.NewClient(&redis.Options{Addr: addr})
		b.admins[addr] = c
	}
	return c
}

func (b *bench) logf(format string, args ...any) {
	if !b.cfg.Quiet {
		fmt.Fprintf(b.log, format+"\n", args...)
	}
}

// run starts the servers, runs the scenarios and writes the outputs. With signals set,
// SIGINT and SIGTERM stop the servers before the program exits.
func run(cfg benchConfig, out outputs, command string, log io.Writer, signals bool) error {
	if err := checkConfig(cfg); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("cannot re-run myself as hot-key workers: %w", err)
	}
	b := &bench{cfg: cfg, log: log, self: self, admins: map[string]*redis.Client{}}
	defer func() {
		for _, c := range b.admins {
			_ = c.Close()
		}
	}()

	servers, stopServers, err := startServers(6)
	if err != nil {
		return err
	}
	var stopOnce sync.Once
	stop := func() { stopOnce.Do(stopServers) }
	defer stop()
	if signals {
		sig := make(chan os.Signal, 1)
		signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
		defer signal.Stop(sig)
		go func() {
			if _, ok := <-sig; ok {
				stop() // the workers die with this process (Pdeathsig)
				os.Exit(130)
			}
		}()
	}
	b.single, b.nodes = servers[0], servers[1:]

	rep := &report{
		Started:  time.Now().UTC().Round(time.Second),
		Command:  command,
		Config:   cfg,
		Machine:  describeMachine(b.redisVersion(b.single.Addr)),
		Versions: libraryVersions(),
	}
	b.logf("bench: redis-server %s on %s (standalone) and %d quorum nodes; %d runs of each scenario",
		rep.Machine.Redis, b.single.Addr, len(b.nodes), cfg.Runs)
	t0 := time.Now()
	for _, sc := range scenarioOrder {
		if len(cfg.Only) > 0 && !slices.Contains(cfg.Only, sc) {
			continue
		}
		libs := selectedLibs(sc, cfg.Libs)
		for r := 1; r <= cfg.Runs; r++ {
			for i := range libs {
				lib := libs[(i+r-1)%len(libs)] // rotate: no library always goes first
				if err := b.flush(); err != nil {
					return err
				}
				res := b.runOne(sc, lib, r)
				rep.Results = append(rep.Results, res)
				b.logf("%-10s %-12s run %d/%d: %s", sc, lib, r, cfg.Runs, summary(res))
			}
		}
	}
	rep.Elapsed = time.Since(t0).Round(time.Second).String()
	b.logf("bench: done in %s", rep.Elapsed)
	return writeOutputs(rep, out, log)
}

func checkConfig(cfg benchConfig) error {
	for _, sc := range cfg.Only {
		if !slices.Contains(scenarioOrder, sc) {
			return fmt.Errorf("--only: unknown scenario %q; the scenarios are %s", sc, strings.Join(scenarioOrder, ", "))
		}
	}
	for _, l := range cfg.Libs {
		if _, ok := libByID(l); !ok {
			return fmt.Errorf("--libs: unknown library %q; the libraries are %s", l, strings.Join(libIDs(), ", "))
		}
	}
	switch {
	case cfg.Runs < 1:
		return fmt.Errorf("--runs %d: at least 1", cfg.Runs)
	case cfg.Duration < 50*time.Millisecond:
		return fmt.Errorf("--duration %v: at least 50ms", cfg.Duration)
	case cfg.Leases < 1:
		return fmt.Errorf("--leases %d: at least 1", cfg.Leases)
	case cfg.LeaseTTL < 100*time.Millisecond:
		return fmt.Errorf("--lease-ttl %v: at least 100ms", cfg.LeaseTTL)
	}
	return nil
}

// selectedLibs returns the libraries that scenario sc runs: those --libs names (only), or
// every library but the variants when it names none.
func selectedLibs(sc string, only []string) []string {
	var out []string
	for _, l := range allLibs() {
		named := slices.Contains(only, l.ID)
		if measures(sc, l) && (named || len(only) == 0 && !isVariant(l.ID)) {
			out = append(out, l.ID)
		}
	}
	return out
}

// flush empties every server between measurements (leases and queues of the last one).
func (b *bench) flush() error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, s := range append([]*redistest.Server{b.single}, b.nodes...) {
		if err := b.admin(s.Addr).FlushAll(ctx).Err(); err != nil {
			return fmt.Errorf("FLUSHALL on %s: %w", s.Addr, err)
		}
	}
	return nil
}

func (b *bench) runOne(sc, lib string, run int) *result {
	switch sc {
	case scThroughput:
		return b.throughput(lib, run)
	case scAllocs:
		return b.allocs(lib, run)
	case scHotKey, scFair, scHotKey1Proc, scFair1Proc:
		return b.hotKey(sc, lib, run)
	case scWakeup:
		return b.wakeup(lib, run)
	case scQuorum, scQuorumLat025, scQuorumLat1:
		return b.quorum(sc, lib, run)
	case scLeases:
		return b.leases(lib, run)
	case scCommands:
		return b.commands(lib, run)
	}
	return newResult(sc, lib, run).fail(fmt.Errorf("unknown scenario %q", sc))
}

// summary is one progress line.
func summary(r *result) string {
	if r.Err != "" && len(r.Metrics) == 0 {
		return "ERROR " + r.Err
	}
	m := r.Metrics
	var s string
	switch r.Scenario {
	case scThroughput:
		s = fmt.Sprintf("%.0f ops/s; CPU per op: server %.1f µs (scripts %.1f; PUBLISH %.2f per op, %.2f per call), client %.1f µs; server ceiling %.0f ops/s", m["ops_per_s"], m["server_cpu_us_per_op"], m["script_us_per_op"], m["publish_us_per_op"], m["publish_us_per_call"], m["client_cpu_us_per_op"], m["server_ceiling_ops_per_s"])
	case scAllocs:
		s = fmt.Sprintf("%.1f allocs/op, %.0f B/op, %.0f µs/op", m["allocs_per_op"], m["bytes_per_op"], m["latency_us"])
	case scWakeup:
		s = fmt.Sprintf("PUBLISH to an idle subscriber running: p50 %.0f µs, p90 %.0f µs over %.0f messages", m["wake_p50_us"], m["wake_p90_us"], m["wakes"])
	case scHotKey, scFair, scHotKey1Proc, scFair1Proc:
		s = fmt.Sprintf("nominal utilisation %.3f; CPU per grant: server %.0f µs (%.1f commands), client %.0f µs; utilisation %.3f, wait p50 %.1f p99 %.1f max %.1f ms, out of order %.3f, min share %.2f, %.0f grants/s, hand-off %.0f µs (within a process %.0f, between %.0f; %.0f%% between)",
			m["nominal_utilisation"], m["server_cpu_us_per_grant"], m["server_cmds_per_grant"], m["client_cpu_us_per_grant"],
			m["utilisation"], m["wait_p50_ms"], m["wait_p99_ms"], m["wait_max_ms"], m["out_of_order"], m["min_share"], m["grants_per_s"], m["handoff_p50_us"],
			m["handoff_local_p50_us"], m["handoff_cross_p50_us"], 100*m["handoff_cross_share"])
	case scQuorum, scQuorumLat025, scQuorumLat1:
		s = fmt.Sprintf("p50 1 node %.0f µs, 5 nodes %.0f µs, ratio %.2f; client CPU per pair %.0f µs, %.0f µs", m["p50_1_us"], m["p50_5_us"], m["p50_ratio"], m["client_cpu_1_us"], m["client_cpu_5_us"])
		if _, ok := m["link_rtt_add_us"]; ok {
			s += fmt.Sprintf("; proxy adds %.0f µs per round trip (PING p50 %.0f → %.0f µs), floor ratio %.2f", m["link_rtt_add_us"], m["ping_direct_us"], m["ping_proxied_us"], m["floor_ratio"])
		}
	case scLeases:
		s = fmt.Sprintf("%.0f leases: %.1f calls, %.1f socket writes, %.0f commands per tick; goroutines %.0f -> %.0f; valid %.3f",
			m["leases"], m["calls_per_tick"], m["writes_per_tick"], m["server_cmds_per_tick"], m["goroutines_few"], m["goroutines_many"], m["valid_fraction"])
	case scCommands:
		s = fmt.Sprintf("client %.2f/op (%s); executed %.2f/op", m["client_cmds_per_op"], r.Notes["client_commands"], m["server_cmds_per_op"])
	}
	if f := r.Notes["lock_failures"]; f != "" && r.Err == "" {
		s += "; " + f
	}
	if r.Err != "" {
		s += " ERROR " + r.Err
	}
	return s
}

func writeOutputs(rep *report, out outputs, log io.Writer) error {
	if out.JSON != "" {
		if err := writeJSON(out.JSON, rep); err != nil {
			return err
		}
		fmt.Fprintln(log, "bench: wrote", out.JSON)
	}
	if out.Plot != "" {
		if err := drawWaits(out.Plot, rep); err != nil {
			return fmt.Errorf("plot: %w", err)
		}
		fmt.Fprintln(log, "bench: wrote", out.Plot)
	}
	md := renderMarkdown(rep, out)
	if out.MD != "" {
		if err := writeMarkdown(out.MD, md); err != nil {
			return err
		}
		fmt.Fprintln(log, "bench: wrote", out.MD)
	} else {
		fmt.Fprintln(log)
		fmt.Fprint(log, md)
	}
	return nil
}
