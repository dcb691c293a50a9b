package main

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// opTimeout bounds one uncontended Lock or Unlock.
const opTimeout = 10 * time.Second

// lockUnlock takes and releases lk once.
func lockUnlock(ctx context.Context, lk locker) error {
	if err := lk.Lock(ctx); err != nil {
		return fmt.Errorf("lock: %w", err)
	}
	if err := lk.Unlock(ctx); err != nil {
		return fmt.Errorf("unlock: %w", err)
	}
	return nil
}

func lockUnlockTimeout(lk locker) error {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	return lockUnlock(ctx, lk)
}

func newResult(sc, lib string, run int) *result {
	return &result{Scenario: sc, Lib: lib, Run: run, Metrics: map[string]float64{}, Notes: map[string]string{}}
}

func (r *result) fail(err error) *result {
	r.Err = err.Error()
	return r
}

// throughput: cfg.Goroutines goroutines, each Lock+Unlock of its own key in a loop, for
// half of --duration. ops/s counts completed Lock+Unlock pairs.
func (b *bench) throughput(lib string, run int) *result {
	res := newResult(scThroughput, lib, run)
	s, err := open(lib, openOpts{Addrs: []string{b.single.Addr}, TTL: b.cfg.TTL})
	if err != nil {
		return res.fail(err)
	}
	defer s.Close()
	n := b.cfg.Goroutines
	lks := make([]locker, n)
	for g := range lks {
		lks[g] = s.Locker(fmt.Sprintf("tp:%s:%d:%d", lib, run, g))
	}
	var (
		lua0           int64
		pub0           cost
		luaErr, pubErr error
		srv0, cli0     time.Duration
		srvOK, cliOK   bool
	)
	count, elapsed, err := loops(n, b.cfg.Duration/2, func(g int) error { return lockUnlockTimeout(lks[g]) }, func() {
		lua0, luaErr = b.scriptMicros(b.single.Addr)
		pub0, pubErr = b.commandCost(b.single.Addr, "publish")
		srv0, srvOK = processCPU(b.single.PID())
		cli0, cliOK = selfCPU()
	})
	srv1, srvOK1 := processCPU(b.single.PID())
	cli1, cliOK1 := selfCPU()
	lua1, luaErr1 := b.scriptMicros(b.single.Addr)
	pub1, pubErr1 := b.commandCost(b.single.Addr, "publish")
	if err != nil {
		return res.fail(err)
	}
	if ops := float64(count); ops > 0 {
		// CPU per pair: the server's (redis-server is one process) and this process's
		// (the library, go-redis or rueidis, and the loop; nothing else runs meanwhile).
		if srvOK && srvOK1 {
			perOp := float64((srv1 - srv0).Microseconds()) / ops
			res.Metrics["server_cpu_us_per_op"] = perOp
			if perOp > 0 { // /proc counts in clock ticks; +Inf would not encode as JSON
				// What one redis-server could serve if it did nothing else: the throughput
				// no client can pass with these commands, however it batches them.
				res.Metrics["server_ceiling_ops_per_s"] = 1e6 / perOp
			}
		}
		if luaErr == nil && luaErr1 == nil {
			res.Metrics["script_us_per_op"] = float64(lua1-lua0) / ops
		}
		if pubErr == nil && pubErr1 == nil {
			// The Mutex release publishes "released" (from inside its script: part of
			// the script's time too).
			res.Metrics["publish_us_per_op"] = float64(pub1.usec-pub0.usec) / ops
			res.Metrics["publish_per_op"] = float64(pub1.calls-pub0.calls) / ops
			if n := pub1.calls - pub0.calls; n > 0 {
				res.Metrics["publish_us_per_call"] = float64(pub1.usec-pub0.usec) / float64(n)
			}
		}
		if cliOK && cliOK1 {
			res.Metrics["client_cpu_us_per_op"] = float64((cli1 - cli0).Microseconds()) / ops
		}
	}
	res.Metrics["ops_per_s"] = float64(count) / elapsed.Seconds()
	res.Metrics["ops"] = float64(count)
	res.Metrics["goroutines"] = float64(n)
	res.Metrics["seconds"] = elapsed.Seconds()
	return res
}

// allocs: one goroutine, Lock+Unlock of one key; runtime.MemStats deltas over
// cfg.AllocOps pairs after a warm-up, so allocations of the library's own background
// goroutines (batchers, readers, pools) count too.
func (b *bench) allocs(lib string, run int) *result {
	res := newResult(scAllocs, lib, run)
	s, err := open(lib, openOpts{Addrs: []string{b.single.Addr}, TTL: b.cfg.TTL})
	if err != nil {
		return res.fail(err)
	}
	defer s.Close()
	lk := s.Locker(fmt.Sprintf("alloc:%s:%d", lib, run))
	ctx := context.Background() // no per-op context: only the library allocates
	for range 200 {
		if err := lockUnlock(ctx, lk); err != nil {
			return res.fail(err)
		}
	}
	n := b.cfg.AllocOps
	var m0, m1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&m0)
	t0 := time.Now()
	for range n {
		if err := lockUnlock(ctx, lk); err != nil {
			return res.fail(err)
		}
	}
	elapsed := time.Since(t0)
	runtime.ReadMemStats(&m1)
	res.Metrics["allocs_per_op"] = float64(m1.Mallocs-m0.Mallocs) / float64(n)
	res.Metrics["bytes_per_op"] = float64(m1.TotalAlloc-m0.TotalAlloc) / float64(n)
	res.Metrics["latency_us"] = float64(elapsed.Microseconds()) / float64(n)
	res.Metrics["ops"] = float64(n)
	return res
}

// renewInterval is how often a library renews a lease of length ttl.
func renewInterval(lib string, ttl time.Duration) time.Duration {
	if lib == libRueidislock {
		return ttl / 2 // its default ExtendInterval
	}
	return ttl / 3 // dlock
}

// leases: one client holds cfg.Leases leases (TTL cfg.LeaseTTL) and renews them by
// itself; what it sends in a window of one TTL, per renewal tick, and how many goroutines
// it runs with 100 and with cfg.Leases leases.
func (b *bench) leases(lib string, run int) *result {
	res := newResult(scLeases, lib, run)
	var cnt counters
	ttl := b.cfg.LeaseTTL
	s, err := open(lib, openOpts{Addrs: []string{b.single.Addr}, TTL: ttl, Count: &cnt})
	if err != nil {
		return res.fail(err)
	}
	defer s.Close()
	if err := lockUnlockTimeout(s.Locker(fmt.Sprintf("lease:%s:%d:warm", lib, run))); err != nil {
		return res.fail(err)
	}
	few := min(100, b.cfg.Leases)
	lockers := make([]locker, b.cfg.Leases)
	for i := range lockers {
		lockers[i] = s.Locker(fmt.Sprintf("lease:%s:%d:%d", lib, run, i))
	}
	// The leases must outlive the acquiring call, and rueidislock ties a lock to the
	// context it was taken with: each Lock gets a context that a watchdog cancels only if
	// the Lock has not returned within opTimeout (a Lock on a key nobody holds can hang
	// in rueidislock: see BENCHMARKS.md). Such a Lock counts as failed; the others stay.
	var (
		cancelMu sync.Mutex
		cancels  []context.CancelFunc
		failed   atomic.Int64
		firstErr atomic.Value
	)
	defer func() {
		for _, c := range cancels {
			c()
		}
	}()
	acquire := func(ls []locker) {
		var next atomic.Int64
		var wg sync.WaitGroup
		for range 64 {
			wg.Go(func() {
				for {
					i := int(next.Add(1)) - 1
					if i >= len(ls) {
						return
					}
					ctx, cancel := context.WithCancel(context.Background())
					watchdog := time.AfterFunc(opTimeout, cancel)
					err := ls[i].Lock(ctx)
					if !watchdog.Stop() {
						err = fmt.Errorf("Lock did not return within %v (cut off): %w", opTimeout, err)
					}
					cancelMu.Lock()
					cancels = append(cancels, cancel)
					cancelMu.Unlock()
					if err != nil {
						failed.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						ls[i] = nil
					}
				}
			})
		}
		wg.Wait()
	}
	var held []locker
	defer func() { releaseAll(held) }()
	idle := settledGoroutines()
	acquire(lockers[:few])
	held = lockers[:few]
	gFew := settledGoroutines()
	t0 := time.Now()
	acquire(lockers[few:])
	held = lockers
	res.Metrics["acquire_s"] = time.Since(t0).Seconds()
	res.Metrics["acquired_fraction"] = 1 - float64(failed.Load())/float64(len(lockers))
	if n := failed.Load(); n > 0 {
		res.Notes["lock_failures"] = fmt.Sprintf("%d of %d Locks failed; first: %v", n, len(lockers), firstErr.Load())
		if n > int64(len(lockers))/100 {
			return res.fail(errors.New(res.Notes["lock_failures"]))
		}
	}
	gMany := settledGoroutines()

	// Steady state: the first renewal of every lease has happened (it may have loaded a
	// script), then a window of 3.5 renewal intervals: 3 or 4 ticks, whatever the phase.
	interval := renewInterval(lib, ttl)
	time.Sleep(interval + interval/4)
	before, err := b.commandStats(b.single.Addr)
	if err != nil {
		return res.fail(err)
	}
	cnt.reset()
	window := interval * 7 / 2
	start := time.Now()
	time.Sleep(window)
	elapsed := time.Since(start)
	calls, cmds, writes := cnt.calls.Load(), cnt.cmds.Load(), cnt.writes.Load()
	after, err := b.commandStats(b.single.Addr)
	if err != nil {
		return res.fail(err)
	}
	valid := 0
	for _, lk := range lockers {
		if lk != nil && lk.Held() {
			valid++
		}
	}
	ticks := elapsed.Seconds() / interval.Seconds()
	res.Metrics["leases"] = float64(len(lockers))
	res.Metrics["ticks"] = ticks
	res.Metrics["calls_per_tick"] = float64(calls) / ticks
	res.Metrics["cmds_per_tick"] = float64(cmds) / ticks
	res.Metrics["writes_per_tick"] = float64(writes) / ticks
	res.Metrics["server_cmds_per_tick"] = float64(statsDelta(before, after).total()) / ticks
	res.Metrics["goroutines_idle"] = float64(idle)
	res.Metrics["goroutines_few"] = float64(gFew)
	res.Metrics["goroutines_many"] = float64(gMany)
	res.Metrics["goroutines_growth"] = float64(gMany - gFew)
	res.Metrics["valid_fraction"] = float64(valid) / float64(len(lockers))
	res.Notes["server_commands"] = statsDelta(before, after).perOp(ticks)
	res.Notes["counted"] = fmt.Sprintf("%d leases, TTL %v, renewal every %v, window %v; goroutines measured with %d and %d leases held", len(lockers), ttl, interval, elapsed.Round(time.Millisecond), few, len(lockers))
	return res
}

// settledGoroutines waits for transient goroutines (timers firing, replies) to end and
// returns the smallest count seen over a short while.
func settledGoroutines() int {
	n := runtime.NumGoroutine()
	for range 10 {
		time.Sleep(20 * time.Millisecond)
		n = min(n, runtime.NumGoroutine())
	}
	return n
}

func releaseAll(ls []locker) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range 64 {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(ls) {
					return
				}
				if ls[i] == nil { // its Lock failed
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
				_ = ls[i].Unlock(ctx)
				cancel()
			}
		})
	}
	wg.Wait()
}

// commands: one goroutine, cfg.CommandOps uncontended Lock+Unlock pairs; the server's
// INFO commandstats delta counts every command it executed, inside scripts too, and
// MONITOR tells the commands the client sent from those that scripts ran; the session's
// counters, its round trips.
func (b *bench) commands(lib string, run int) *result {
	res := newResult(scCommands, lib, run)
	var cnt counters
	s, err := open(lib, openOpts{Addrs: []string{b.single.Addr}, TTL: b.cfg.TTL, Count: &cnt})
	if err != nil {
		return res.fail(err)
	}
	defer s.Close()
	lk := s.Locker(fmt.Sprintf("cmd:%s:%d", lib, run))
	for range 20 {
		if err := lockUnlockTimeout(lk); err != nil {
			return res.fail(err)
		}
	}
	mon, err := startMonitor(b.single.Addr)
	if err != nil {
		return res.fail(err)
	}
	defer mon.stop()
	marker := fmt.Sprintf("bench-marker-%s-%d", lib, run)
	if err := b.mark(mon, marker+"-begin"); err != nil {
		return res.fail(err)
	}
	before, err := b.commandStats(b.single.Addr)
	if err != nil {
		return res.fail(err)
	}
	n := b.cfg.CommandOps
	cnt.reset()
	for range n {
		if err := lockUnlockTimeout(lk); err != nil {
			return res.fail(err)
		}
	}
	res.Metrics["client_calls_per_op"] = float64(cnt.calls.Load()) / float64(n)
	after, err := b.commandStats(b.single.Addr)
	if err != nil {
		return res.fail(err)
	}
	if err := b.mark(mon, marker+"-end"); err != nil {
		return res.fail(err)
	}
	client, script := mon.between(marker+"-begin", marker+"-end")
	delta := statsDelta(before, after)
	res.Metrics["server_cmds_per_op"] = float64(delta.total()) / float64(n)
	res.Metrics["client_cmds_per_op"] = float64(client.total()) / float64(n)
	res.Metrics["script_cmds_per_op"] = float64(script.total()) / float64(n)
	res.Metrics["ops"] = float64(n)
	res.Notes["client_commands"] = client.perOp(float64(n))
	res.Notes["script_commands"] = script.perOp(float64(n))
	res.Notes["commandstats"] = delta.perOp(float64(n))
	return res
}

// cmdCounts counts commands by name.
type cmdCounts map[string]int64

func (c cmdCounts) total() int64 {
	var t int64
	for _, v := range c {
		t += v
	}
	return t
}

// perOp formats the counts divided by n, largest first: "evalsha 2.00, set 1.00".
func (c cmdCounts) perOp(n float64) string {
	names := make([]string, 0, len(c))
	for k, v := range c {
		if v > 0 {
			names = append(names, k)
		}
	}
	slices.SortFunc(names, func(a, b string) int {
		if c[a] != c[b] {
			return int(c[b] - c[a])
		}
		return strings.Compare(a, b)
	})
	parts := make([]string, len(names))
	for i, k := range names {
		parts[i] = fmt.Sprintf("%s %.2f", k, float64(c[k])/n)
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

// ignored are the commands of the benchmark itself (and keep-alive pings), left out of
// every count.
var ignored = map[string]bool{"info": true, "echo": true, "ping": true, "monitor": true, "config|resetstat": true}

func statsDelta(before, after cmdCounts) cmdCounts {
	d := cmdCounts{}
	for k, v := range after {
		if !ignored[k] && v-before[k] != 0 {
			d[k] = v - before[k]
		}
	}
	return d
}
