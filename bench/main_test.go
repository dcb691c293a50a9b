package main

import (
	"bytes"
	"encoding/json"
	"image/png"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	// The hot-key scenarios re-run this binary as their workers, the latency scenarios
	// as their delay proxy.
	if childMain() {
		os.Exit(0)
	}
	goleak.VerifyTestMain(m)
}

// keyMetrics are the metrics every result of a scenario must have, each positive.
var keyMetrics = map[string][]string{
	scThroughput:   {"ops_per_s"},
	scAllocs:       {"allocs_per_op"},
	scHotKey:       {"grants_per_s"},
	scFair:         {"grants_per_s"},
	scFair1Proc:    {"grants_per_s"},
	scHotKey1Proc:  {"grants_per_s"},
	scWakeup:       {"wake_p50_us", "request_server_cpu_us", "floor_client_cpu_us_per_pair"},
	scQuorum:       {"p50_5_us"},
	scQuorumLat025: {"link_rtt_add_us"},
	scQuorumLat1:   {"link_rtt_add_us"},
	scLeases:       {"cmds_per_tick"},
	scCommands:     {"client_cmds_per_op"},
}

// TestSmoke runs every scenario for every library briefly against real redis-server
// processes and checks what the run wrote: well-formed JSON with results from every
// library, a PNG, and the Markdown report. It checks no timing.
func TestSmoke(t *testing.T) {
	dir := t.TempDir()
	cfg := defaultConfig()
	cfg.Duration = 400 * time.Millisecond
	cfg.Runs = 1
	cfg.Leases = 200
	cfg.LeaseTTL = 300 * time.Millisecond
	cfg.AllocOps = 200
	cfg.CommandOps = 50
	cfg.Quiet = !testing.Verbose()
	out := outputs{
		JSON: filepath.Join(dir, "results", "results.json"),
		MD:   filepath.Join(dir, "BENCHMARKS.md"),
		Plot: filepath.Join(dir, "waits.png"),
	}
	// An existing report keeps its hand-written text.
	const handWritten = "Hand-written notes stay.\n"
	if err := os.WriteFile(out.MD, []byte("# Title\n\n"+mdBegin+"\nold\n"+mdEnd+"\n"+handWritten), 0o644); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	start := time.Now()
	if err := run(cfg, out, "go test ./bench", &log, false); err != nil {
		t.Fatalf("run: %v\n%s", err, log.String())
	}
	t.Logf("the suite took %v", time.Since(start).Round(time.Millisecond))
	if testing.Verbose() {
		t.Log(log.String())
	}

	raw, err := os.ReadFile(out.JSON)
	if err != nil {
		t.Fatal(err)
	}
	var rep report
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&rep); err != nil {
		t.Fatalf("results JSON is not well-formed: %v", err)
	}
	if rep.Machine.NumCPU < 1 || rep.Machine.Go == "" || rep.Machine.Redis == "" {
		t.Errorf("machine description incomplete: %+v", rep.Machine)
	}
	for _, l := range libraries {
		if rep.Versions[l.Module] == "" {
			t.Errorf("no version for %s", l.Module)
		}
	}
	for _, sc := range scenarioOrder {
		for _, lib := range scenarioLibs(sc) {
			rs := rep.find(sc, lib)
			if len(rs) != cfg.Runs {
				t.Errorf("%s/%s: %d results, want %d", sc, lib, len(rs), cfg.Runs)
				continue
			}
			for _, r := range rs {
				if r.Err != "" {
					t.Errorf("%s/%s: error: %s", sc, lib, r.Err)
				}
				for _, k := range keyMetrics[sc] {
					if v, ok := r.Metrics[k]; !ok || !(v > 0) || math.IsInf(v, 0) {
						t.Errorf("%s/%s: %s = %v (present %v), want a positive number; metrics %v", sc, lib, k, v, ok, r.Metrics)
					}
				}
				for k, v := range r.Metrics {
					if math.IsNaN(v) || math.IsInf(v, 0) {
						t.Errorf("%s/%s: metric %s = %v", sc, lib, k, v)
					}
				}
				if isHotKey(sc) {
					if len(r.Samples) == 0 {
						t.Errorf("%s/%s: no samples", sc, lib)
					}
					gs := map[int]bool{}
					for _, s := range r.Samples {
						gs[s.G] = true
						if s.Acq != 0 && (s.Acq < s.Req || s.Rel < s.Acq) {
							t.Errorf("%s/%s: sample out of order: %+v", sc, lib, s)
							break
						}
					}
					if len(gs) != cfg.HotWorkers*cfg.HotGoroutines {
						t.Errorf("%s/%s: samples from %d goroutines, want %d", sc, lib, len(gs), cfg.HotWorkers*cfg.HotGoroutines)
					}
					// Both from one INFO commandstats per snapshot.
					if !(r.Metrics["server_cmds_per_grant"] > 0) || !(r.Metrics["script_us_per_grant"] > 0) {
						t.Errorf("%s/%s: commands %v and script µs %v per grant, want both", sc, lib, r.Metrics["server_cmds_per_grant"], r.Metrics["script_us_per_grant"])
					}
				}
			}
		}
	}

	f, err := os.Open(out.Plot)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("plot is not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 800 || b.Dy() < 400 {
		t.Errorf("plot is %v: too small to read", b)
	}

	md, err := os.ReadFile(out.MD)
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{mdBegin, mdEnd, handWritten, "| scenario | metric |", "dlock ÷ best peer", "![", "waits.png", "## Machine", "## Libraries"} {
		if !strings.Contains(string(md), want) {
			t.Errorf("BENCHMARKS.md lacks %q", want)
		}
	}
	if strings.Contains(string(md), "\nold\n") {
		t.Error("BENCHMARKS.md kept the old generated part")
	}
	for _, l := range libraries {
		if !strings.Contains(string(md), l.Label) {
			t.Errorf("BENCHMARKS.md lacks a column for %s", l.Label)
		}
	}
}

func TestOutOfOrder(t *testing.T) {
	ms := func(x int) int64 { return int64(x) * int64(time.Millisecond) }
	// Requests at 0, 1, 2, 3 ms; granted in the order 0, 2, 1, and 3 never.
	samples := []sample{
		{G: 0, Req: ms(0), Acq: ms(10), Rel: ms(11)},
		{G: 1, Req: ms(1), Acq: ms(14), Rel: ms(15)},
		{G: 2, Req: ms(2), Acq: ms(12), Rel: ms(13)},
		{G: 3, Req: ms(3)},
	}
	got, got1 := outOfOrder(samples, 0, ms(100))
	// The grant to 2 overtook 1 (1 ms older); the grant to 1 overtook no one but 3 is
	// younger; the grant to 0 is in order.
	if got != 1.0/3 || got1 != 0 {
		t.Errorf("outOfOrder = %v, %v; want 1/3, 0", got, got1)
	}
	samples[1].Req = ms(0) - ms(1)/2 // now 2 overtook a request 2.5 ms older, and 0 one 0.5 ms older
	got, got1 = outOfOrder(samples, ms(-5), ms(100))
	if got != 2.0/3 || got1 != 1.0/3 {
		t.Errorf("outOfOrder = %v, %v; want 2/3, 1/3", got, got1)
	}
}

func TestHotMetrics(t *testing.T) {
	base := time.Unix(1000, 0)
	at := func(ms float64) int64 { return base.Add(time.Duration(ms * float64(time.Millisecond))).UnixNano() }
	// Two goroutines alternate 1 ms holds with no gap over 10 ms: utilisation 1.
	var samples []sample
	for i := range 10 {
		samples = append(samples, sample{G: i % 2, Req: at(float64(i) - 1), Acq: at(float64(i)), Rel: at(float64(i) + 1)})
	}
	res := newResult(scHotKey, libDlock, 1)
	hotMetrics(res, samples, base, base.Add(10*time.Millisecond), 2, 1)
	m := res.Metrics
	if math.Abs(m["utilisation"]-1) > 1e-9 {
		t.Errorf("utilisation = %v, want 1", m["utilisation"])
	}
	if m["wait_p50_ms"] != 1 || m["wait_max_ms"] != 1 {
		t.Errorf("waits p50 %v max %v, want 1 ms", m["wait_p50_ms"], m["wait_max_ms"])
	}
	if m["handoff_p50_us"] != 0 || m["regrant_same_goroutine"] != 0 {
		t.Errorf("hand-off %v µs, re-grants %v; want 0 and 0", m["handoff_p50_us"], m["regrant_same_goroutine"])
	}
	if m["handoff_cross_share"] != 1 || m["handoff_local_p50_us"] != 0 {
		t.Errorf("hand-offs between processes %v, within p50 %v; want 1 and 0 (one goroutine per process)", m["handoff_cross_share"], m["handoff_local_p50_us"])
	}
	if m["overlaps"] != 0 {
		t.Errorf("overlaps = %v, want 0", m["overlaps"])
	}
	if got := overlaps(append(samples, sample{G: 0, Req: at(2), Acq: at(4.5), Rel: at(5)})); got != 1 {
		t.Errorf("overlaps with a hold inside another = %d, want 1", got)
	}
	if m["min_share"] != 1 || m["starved_goroutines"] != 0 || m["out_of_order"] != 0 {
		t.Errorf("share %v starved %v out of order %v", m["min_share"], m["starved_goroutines"], m["out_of_order"])
	}
}

func TestWriteMarkdownWithoutMarkers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "B.md")
	if err := os.WriteFile(path, []byte("no markers"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := writeMarkdown(path, "table\n"); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(path)
	if !strings.Contains(string(b), mdBegin+"\n\ntable\n\n"+mdEnd) || strings.Contains(string(b), "no markers") {
		t.Errorf("got %q", b)
	}
}

func TestHandoffs(t *testing.T) {
	us := func(x int) int64 { return int64(x) * int64(time.Microsecond) }
	base := us(100) // the window starts at 1 ns: a sample never granted has Acq 0
	hold := func(g, acq, rel int) sample { return sample{G: g, Req: base, Acq: base + us(acq), Rel: base + us(rel)} }
	// Goroutines 0 and 1 run in process 0, 2 and 3 in process 1 (two per process).
	samples := []sample{
		hold(0, 0, 1000),
		hold(1, 1010, 2000),          // within: 10 µs
		hold(2, 2500, 3500),          // between: 500 µs
		hold(3, 3520, 4500),          // within: 20 µs
		hold(0, 5100, 6000),          // between: 600 µs
		hold(0, 6030, 7000),          // within, the same goroutine again: 30 µs
		{G: 1, Req: base + us(6500)}, // never granted: no hand-off
	}
	tests := []struct {
		name       string
		perProcess int
		want       handoffStats
	}{
		{"two per process", 2, handoffStats{all: 30, local: 20, cross: 500, crossShare: 2.0 / 5, regrant: 1.0 / 5}},
		{"one per process", 1, handoffStats{all: 30, local: 30, cross: 20, crossShare: 4.0 / 5, regrant: 1.0 / 5}},
		{"all in one process", 4, handoffStats{all: 30, local: 30, cross: 0, crossShare: 0, regrant: 1.0 / 5}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if got := handoffs(samples, 1, us(10000), tc.perProcess); got != tc.want {
				t.Errorf("handoffs = %+v, want %+v", got, tc.want)
			}
		})
	}
	if got := handoffs(samples[:1], 1, us(10000), 2); got != (handoffStats{}) {
		t.Errorf("handoffs of one grant = %+v, want zeros", got)
	}
}

// TestIssueGoals judges the goals of the issue's table at their edges.
func TestIssueGoals(t *testing.T) {
	cfg := defaultConfig()
	find := func(sc, metric string) row {
		for _, rw := range rows(cfg) {
			if rw.sc == sc && rw.metric == metric {
				return rw
			}
		}
		t.Fatalf("no row for %s %s", sc, metric)
		return row{}
	}
	tests := []struct {
		sc, metric string
		v, ratio   float64
		met        bool
	}{
		{scThroughput, "ops_per_s", 1, 2, true},
		{scThroughput, "ops_per_s", 1, 1.99, false},
		{scThroughput, "client_cpu_us_per_op", 20, math.NaN(), true},
		{scThroughput, "client_cpu_us_per_op", 20.1, math.NaN(), false},
		{scFair, "utilisation", 0.90, math.NaN(), true},
		{scFair1Proc, "utilisation", 0.89, math.NaN(), false},
		{scFair1Proc, "out_of_order", 0, math.NaN(), true},
		{scFair1Proc, "out_of_order", 0.001, math.NaN(), false},
	}
	for _, tc := range tests {
		rw := find(tc.sc, tc.metric)
		if rw.met == nil {
			t.Errorf("%s %s: no goal", tc.sc, tc.metric)
			continue
		}
		if got := rw.met(&report{}, tc.v, tc.ratio); got != tc.met {
			t.Errorf("%s %s at %v (ratio %v): met %v, want %v", tc.sc, tc.metric, tc.v, tc.ratio, got, tc.met)
		}
	}
	// The quorum behind the delay proxy is judged against the floor of the same run, and
	// misses without one.
	for _, sc := range []string{scQuorumLat025, scQuorumLat1} {
		floor := &report{Results: []*result{{Scenario: sc, Lib: libDlock, Metrics: map[string]float64{"floor_ratio": 1.29}}}}
		for _, tc := range []struct {
			r   *report
			v   float64
			met bool
		}{{floor, 1.32, true}, {floor, 1.33, false}, {&report{}, 1.0, false}} {
			if got := find(sc, "p50_ratio").met(tc.r, tc.v, math.NaN()); got != tc.met {
				t.Errorf("%s p50_ratio at %v: met %v, want %v", sc, tc.v, got, tc.met)
			}
		}
	}
	// The FairMutex in one process is judged by its ratios to the Mutex in one process.
	mutex := &report{Results: []*result{{Scenario: scHotKey1Proc, Lib: libDlock,
		Metrics: map[string]float64{"grants_per_s": 1000, "server_cpu_us_per_grant": 50}}}}
	for _, tc := range []struct {
		metric string
		v      float64
		met    bool
	}{
		{"grants_per_s", 950, true}, {"grants_per_s", 949, false},
		{"server_cpu_us_per_grant", 100, true}, {"server_cpu_us_per_grant", 101, false},
	} {
		rw := find(scFair1Proc, tc.metric)
		if rw.met == nil {
			t.Errorf("fair-1proc %s: no goal", tc.metric)
			continue
		}
		if got := rw.met(mutex, tc.v, math.NaN()); got != tc.met {
			t.Errorf("fair-1proc %s at %v against the Mutex's: met %v, want %v", tc.metric, tc.v, got, tc.met)
		}
		if rw.met(&report{}, tc.v, math.NaN()) {
			t.Errorf("fair-1proc %s: met without the Mutex's figure", tc.metric)
		}
	}
	if rw := find(scQuorum, "p50_ratio"); rw.met != nil || !strings.Contains(rw.goal, "informative") {
		t.Errorf("the loopback quorum ratio is judged (goal %q): it measures the machine's wake-ups", rw.goal)
	}
}

func TestHotShape(t *testing.T) {
	cfg := defaultConfig()
	for _, tc := range []struct {
		sc                  string
		workers, perProcess int
	}{
		{scHotKey, cfg.HotWorkers, cfg.HotGoroutines},
		{scFair, cfg.HotWorkers, cfg.HotGoroutines},
		{scFair1Proc, 1, cfg.HotWorkers * cfg.HotGoroutines},
		{scHotKey1Proc, 1, cfg.HotWorkers * cfg.HotGoroutines},
	} {
		if w, g := cfg.hotShape(tc.sc); w != tc.workers || g != tc.perProcess {
			t.Errorf("%s: %d processes of %d goroutines, want %d of %d", tc.sc, w, g, tc.workers, tc.perProcess)
		}
	}
}

func TestPerGrant(t *testing.T) {
	before := serverSnapshot{cpu: 100 * time.Millisecond, cpuOK: true,
		calls: cmdCounts{"evalsha": 10, "info": 3}, usec: cmdCounts{"evalsha": 500}}
	after := serverSnapshot{cpu: 140 * time.Millisecond, cpuOK: true,
		calls: cmdCounts{"evalsha": 50, "publish": 20, "info": 9}, usec: cmdCounts{"evalsha": 2500, "publish": 100}}
	samples := []sample{{Acq: 1}, {Acq: 2}, {}} // a wait that never ended is no grant
	for range 18 {
		samples = append(samples, sample{Acq: 3})
	}
	res := newResult(scFair1Proc, libDlockFair, 1)
	perGrant(res, before, after, 60*time.Millisecond, samples)
	m := res.Metrics
	want := map[string]float64{"grants": 20, "server_cpu_us_per_grant": 2000, "client_cpu_us_per_grant": 3000,
		"server_cmds_per_grant": 3, "script_us_per_grant": 100}
	for k, v := range want {
		if m[k] != v {
			t.Errorf("%s = %v, want %v", k, m[k], v)
		}
	}
	if got := res.Notes["server_commands"]; got != "evalsha 2.00, publish 1.00" {
		t.Errorf("server_commands note = %q (INFO is the benchmark's own)", got)
	}
	// The server's CPU unknown (off Linux): no figure rather than a wrong one.
	res = newResult(scFair1Proc, libDlockFair, 1)
	perGrant(res, serverSnapshot{}, serverSnapshot{}, 0, samples)
	for _, k := range []string{"server_cpu_us_per_grant", "client_cpu_us_per_grant"} {
		if _, ok := res.Metrics[k]; ok {
			t.Errorf("%s reported without a measurement", k)
		}
	}
}

func TestWakeMetrics(t *testing.T) {
	res := newResult(scWakeup, libDlock, 1)
	wakeMetrics(res, []int64{300e3, 100e3, 200e3, 400e3, 1000e3})
	if m := res.Metrics; m["wake_p50_us"] != 300 || m["wake_p90_us"] != 1000 || m["wakes"] != 5 {
		t.Errorf("wake-up metrics %v, want p50 300, p90 1000 over 5", m)
	}
}

// TestNoGrantInTheWindowIsAFailedRun: a hot-key run in which no request of the window was
// granted fails, so that its zeros (waits, grants/s) are not medians' figures; the run
// beside it with grants alone makes the median, and the report counts the failed one.
func TestNoGrantInTheWindowIsAFailedRun(t *testing.T) {
	base := time.Unix(1000, 0)
	at := func(ms float64) int64 { return base.Add(time.Duration(ms * float64(time.Millisecond))).UnixNano() }
	window := func(run int, samples []sample) *result {
		res := newResult(scHotKey, libDlock, run)
		hotMetrics(res, samples, base, base.Add(10*time.Millisecond), 1, 1)
		noneGranted(res)
		return res
	}
	// Run 1: a request before the window, held across it; another never granted.
	starved := window(1, []sample{{Req: at(-2), Acq: at(-1), Rel: at(20)}, {Req: at(1)}})
	if starved.Err == "" {
		t.Fatalf("a window without grants: no error, metrics %v", starved.Metrics)
	}
	granted := window(2, []sample{{Req: at(1), Acq: at(3), Rel: at(4)}})
	if granted.Err != "" {
		t.Fatalf("a window with a grant failed: %s", granted.Err)
	}
	r := &report{Results: []*result{starved, granted}}
	if v, ok := r.median(scHotKey, libDlock, "wait_p50_ms"); !ok || v != 2 {
		t.Fatalf("median wait = %v (%v), want 2 ms: the failed run's 0 counted", v, ok)
	}
	if n := r.failedRuns(scHotKey, libDlock); n != 1 {
		t.Fatalf("failed runs = %d, want 1", n)
	}
}
