package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// linkDelays are the latency scenarios: every quorum node behind the delay proxy, each
// direction of every link delayed by this much.
var linkDelays = map[string]time.Duration{
	scQuorumLat025: 250 * time.Microsecond,
	scQuorumLat1:   time.Millisecond,
}

// quorum: one goroutine alternates Lock+Unlock on one node and on the five-node quorum,
// for half of --duration; p50 of each, their ratio, and this process's CPU per pair. On
// loopback (scQuorum) the servers answer in tens of µs and the ratio measures how fast
// the machine wakes five idle redis-servers; the latency scenarios put every node behind
// the delay proxy, as if it were a network round trip away, and first measure the link.
func (b *bench) quorum(sc, lib string, run int) *result {
	res := newResult(sc, lib, run)
	addrs := make([]string, len(b.nodes))
	for i, n := range b.nodes {
		addrs[i] = n.Addr
	}
	warm := 50
	if delay, ok := linkDelays[sc]; ok {
		p, err := b.startProxy(delay, addrs)
		if err != nil {
			return res.fail(err)
		}
		defer p.stop()
		if err := linkStats(res, addrs[0], p.addrs); err != nil {
			return res.fail(err)
		}
		addrs = p.addrs
		warm = 10 // connections and scripts; each pair now costs milliseconds
	}
	return b.quorumPairs(res, addrs, warm)
}

// quorumPairs measures alternating Lock+Unlock pairs on addrs[:1] and on addrs.
func (b *bench) quorumPairs(res *result, addrs []string, warm int) *result {
	lib := res.Lib
	one, err := open(lib, openOpts{Addrs: addrs[:1], TTL: b.cfg.TTL})
	if err != nil {
		return res.fail(err)
	}
	defer one.Close()
	five, err := open(lib, openOpts{Addrs: addrs, TTL: b.cfg.TTL})
	if err != nil {
		return res.fail(err)
	}
	defer five.Close()
	l1 := one.Locker(fmt.Sprintf("q1:%s:%s:%d", res.Scenario, lib, res.Run))
	l5 := five.Locker(fmt.Sprintf("q5:%s:%s:%d", res.Scenario, lib, res.Run))
	for range warm {
		if err := errors.Join(lockUnlockTimeout(l1), lockUnlockTimeout(l5)); err != nil {
			return res.fail(err)
		}
	}
	// CPU: getrusage of this process around each pair, outside the timed part (the proxy
	// runs in its own process; the servers in theirs).
	cpuOK := true
	timed := func(lk locker, cpu *time.Duration) (float64, error) {
		c0, ok0 := selfCPU()
		t := time.Now()
		err := lockUnlockTimeout(lk)
		d := time.Since(t)
		c1, ok1 := selfCPU()
		cpuOK = cpuOK && ok0 && ok1
		*cpu += c1 - c0
		return float64(d.Nanoseconds()) / 1e3, err
	}
	var t1, t5 []float64
	var cpu1, cpu5 time.Duration
	deadline := time.Now().Add(b.cfg.Duration / 2)
	for time.Now().Before(deadline) && len(t1) < 50000 {
		d1, err1 := timed(l1, &cpu1)
		d5, err5 := timed(l5, &cpu5)
		if err := errors.Join(err1, err5); err != nil {
			return res.fail(err)
		}
		t1, t5 = append(t1, d1), append(t5, d5)
	}
	slices.Sort(t1)
	slices.Sort(t5)
	m := res.Metrics
	m["p50_1_us"] = quantile(t1, 0.5)
	m["p50_5_us"] = quantile(t5, 0.5)
	m["p99_1_us"] = quantile(t1, 0.99)
	m["p99_5_us"] = quantile(t5, 0.99)
	m["p50_ratio"] = quantile(t5, 0.5) / quantile(t1, 0.5)
	m["ops"] = float64(len(t1))
	if cpuOK {
		m["client_cpu_1_us"] = float64(cpu1.Microseconds()) / float64(len(t1))
		m["client_cpu_5_us"] = float64(cpu5.Microseconds()) / float64(len(t5))
	}
	return res
}

// linkRounds is how many rounds linkStats measures: enough for a p50, short even at 1 ms
// each way (a round is four round trips: about 9 ms there).
const linkRounds = 100

// linkStats measures what the proxy does, with PINGs from fresh go-redis clients: the
// round trip it adds (p50 through the proxy to the first node minus p50 direct, taken in
// turns), and the floor of a quorum behind it: the p50 of the time until the majority-th
// of PINGs sent at once to every node through the proxy has answered, divided by the
// p50 of one PING through it. No library's quorum Lock can beat that ratio: it waits for
// a majority of parallel round trips, plus the fan-out.
func linkStats(res *result, direct string, proxied []string) error {
	d := redis.NewClient(&redis.Options{Addr: direct})
	defer d.Close()
	ps := make([]*redis.Client, len(proxied))
	for i, a := range proxied {
		ps[i] = redis.NewClient(&redis.Options{Addr: a})
		defer ps[i].Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ping := func(c *redis.Client) (float64, error) {
		t := time.Now()
		err := c.Ping(ctx).Err()
		return float64(time.Since(t).Nanoseconds()) / 1e3, err
	}
	for range 3 { // connections
		if _, err := fanOut(ctx, slices.Concat(ps, []*redis.Client{d})); err != nil {
			return fmt.Errorf("PING through the proxy: %w", err)
		}
	}
	var direct1, proxied1, majority []float64
	for range linkRounds {
		a, err1 := ping(d)
		b, err2 := ping(ps[0])
		all, err3 := fanOut(ctx, ps)
		if err := errors.Join(err1, err2, err3); err != nil {
			return fmt.Errorf("PING through the proxy: %w", err)
		}
		direct1, proxied1 = append(direct1, a), append(proxied1, b)
		majority = append(majority, majorityOf(all))
	}
	for _, x := range [][]float64{direct1, proxied1, majority} {
		slices.Sort(x)
	}
	m := res.Metrics
	m["ping_direct_us"] = quantile(direct1, 0.5)
	m["ping_proxied_us"] = quantile(proxied1, 0.5)
	m["link_rtt_add_us"] = quantile(proxied1, 0.5) - quantile(direct1, 0.5)
	m["ping_majority_us"] = quantile(majority, 0.5)
	m["floor_ratio"] = quantile(majority, 0.5) / quantile(proxied1, 0.5)
	return nil
}

// fanOut PINGs every client at once, a goroutine each, and returns the µs from the start
// until each answered.
func fanOut(ctx context.Context, cs []*redis.Client) ([]float64, error) {
	out := make([]float64, len(cs))
	errs := make([]error, len(cs))
	var wg sync.WaitGroup
	t := time.Now()
	for i, c := range cs {
		wg.Go(func() {
			errs[i] = c.Ping(ctx).Err()
			out[i] = float64(time.Since(t).Nanoseconds()) / 1e3
		})
	}
	wg.Wait()
	return out, errors.Join(errs...)
}

// majorityOf returns the time by which a majority of the parallel calls had answered:
// the (n/2+1)-th smallest of their times (the third of five).
func majorityOf(times []float64) float64 {
	if len(times) == 0 {
		return 0
	}
	s := slices.Clone(times)
	slices.Sort(s)
	return s[len(s)/2]
}
