package dlock_test

import (
	"context"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// go test -run '^$' -bench . -benchmem

func BenchmarkLockUnlock(b *testing.B) {
	serialLockUnlock(b, redistest.Start(b).Client(b))
}

// BenchmarkLockUnlockContextTimeout is BenchmarkLockUnlock on a client with
// ContextTimeoutEnabled, whose callers send their own scripts when no other call is in
// flight for their keys.
func BenchmarkLockUnlockContextTimeout(b *testing.B) {
	opt := redistest.Start(b).Options()
	opt.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	serialLockUnlock(b, rdb)
}

// serialLockUnlock is one goroutine's Lock+Unlock of one Mutex on rdb, b.N times.
func serialLockUnlock(b *testing.B, rdb redis.UniversalClient) {
	c := dlock.New(rdb)
	defer c.Close()
	m := c.Mutex("bench")
	b.ReportAllocs()
	for b.Loop() {
		lockUnlock(b, m)
	}
}

// BenchmarkLockUnlockParallel takes distinct locks from concurrent goroutines: their
// requests share round trips.
func BenchmarkLockUnlockParallel(b *testing.B) {
	srv := redistest.Start(b)
	c := dlock.New(srv.Client(b))
	defer c.Close()
	ctx := context.Background()
	var id atomic.Int64
	b.ReportAllocs()
	b.SetParallelism(16) // 16 x GOMAXPROCS goroutines
	defer redistest.ReportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		m := c.Mutex("bench:" + strconv.FormatInt(id.Add(1), 10))
		for pb.Next() {
			l, err := m.Lock(ctx)
			if err != nil {
				b.Error(err)
				return
			}
			if err := l.Unlock(ctx); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func BenchmarkTryLockHeld(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	holder, c := dlock.New(rdb), dlock.New(rdb)
	defer holder.Close()
	defer c.Close()
	ctx := context.Background()
	l, err := holder.Mutex("bench").Lock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer l.Unlock(ctx)
	m := c.Mutex("bench")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := m.TryLock(ctx); err == nil {
			b.Fatal("TryLock of a held lock succeeded")
		}
	}
}

func BenchmarkReentry(b *testing.B) {
	srv := redistest.Start(b)
	c := dlock.New(srv.Client(b))
	defer c.Close()
	ctx := context.Background()
	m := c.Mutex("bench")
	outer, err := m.Lock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	defer outer.Unlock(ctx)
	b.ReportAllocs()
	for b.Loop() {
		l, err := m.Lock(outer.Context())
		if err != nil {
			b.Fatal(err)
		}
		_ = l.Unlock(ctx)
	}
}

// BenchmarkQuorumVsSingle alternates Lock+Unlock on one node and on a five-node quorum in
// the same run and reports both medians and their ratio (goal: under 1.5).
func BenchmarkQuorumVsSingle(b *testing.B) {
	servers := redistest.StartNodes(b, 5)
	nodes := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		nodes[i] = s.Client(b)
	}
	single := dlock.New(nodes[0])
	defer single.Close()
	five, err := dlock.NewQuorum(nodes)
	if err != nil {
		b.Fatal(err)
	}
	defer five.Close()
	b.ReportAllocs()
	alternate(b, single.Mutex("bench:single"), five.Mutex("bench:quorum"), "1node", "5nodes")
}

// alternate takes turns between an uncontended Lock+Unlock of m0 and one of m1 in one
// loop, so that the load of the machine falls on both alike, and reports each one's median
// (p50-<name0>-µs, p50-<name1>-µs) and their ratio (p50-ratio: m1's over m0's).
func alternate(b *testing.B, m0, m1 *dlock.Mutex, name0, name1 string) {
	var t0, t1 []time.Duration
	for b.Loop() {
		t0 = append(t0, lockUnlock(b, m0))
		t1 = append(t1, lockUnlock(b, m1))
	}
	p0, p1 := median(t0), median(t1)
	b.ReportMetric(float64(p0.Microseconds()), "p50-"+name0+"-µs")
	b.ReportMetric(float64(p1.Microseconds()), "p50-"+name1+"-µs")
	b.ReportMetric(float64(p1)/float64(p0), "p50-ratio")
}

// lockUnlock locks and unlocks m once and returns how long that took.
func lockUnlock(b *testing.B, m *dlock.Mutex) time.Duration {
	ctx := context.Background()
	start := time.Now()
	l, err := m.Lock(ctx)
	if err != nil {
		b.Fatal(err)
	}
	if err := l.Unlock(ctx); err != nil {
		b.Fatal(err)
	}
	return time.Since(start)
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// BenchmarkLockUnlockObserver is the uncontended Lock+Unlock with no observer and with one
// whose every func is empty, on the same server: what sending the events costs, apart
// from what an observer does with them. The sub-benchmarks give each one's allocations;
// "alternating" takes turns between the two in one loop, so that the load of the machine
// falls on both alike, and reports their medians and ratio.
func BenchmarkLockUnlockObserver(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	noop := dlock.Observer{
		WaitStarted: func(dlock.WaitStart) {},
		Attempted:   func(dlock.Attempt) {},
		WaitEnded:   func(dlock.WaitEnd) {},
		HoldEnded:   func(dlock.HoldEnd) {},
		Renewal:     func(dlock.Renewal) {},
		HandedOff:   func(dlock.HandOff) {},
		NodeSilent:  func(dlock.NodeSilence) {},
	}
	none, observed := dlock.New(rdb), dlock.New(rdb, dlock.WithObserver(noop))
	defer none.Close()
	defer observed.Close()
	for _, bc := range []struct {
		name string
		c    *dlock.Client
	}{{"none", none}, {"noop", observed}} {
		b.Run(bc.name, func(b *testing.B) {
			m := bc.c.Mutex("bench:" + bc.name)
			b.ReportAllocs()
			for b.Loop() {
				lockUnlock(b, m)
			}
		})
	}
	b.Run("alternating", func(b *testing.B) {
		alternate(b, none.Mutex("bench:none"), observed.Mutex("bench:noop"), "none", "noop")
	})
}

// BenchmarkMultiMutexLockUnlock locks and unlocks three names at once, uncontended: on one
// server one script each way, like a Mutex; on a Cluster one script per hash slot, taken in
// order, and released at once.
func BenchmarkMultiMutexLockUnlock(b *testing.B) {
	for _, d := range []struct {
		name string
		rdb  func(b *testing.B) redis.UniversalClient
	}{
		{"standalone", func(b *testing.B) redis.UniversalClient { return redistest.Start(b).Client(b) }},
		{"cluster", func(b *testing.B) redis.UniversalClient { return redistest.StartCluster(b, 3).Client(b) }},
	} {
		b.Run(d.name, func(b *testing.B) {
			c := dlock.New(d.rdb(b))
			defer c.Close()
			ctx := context.Background()
			m := c.MultiMutex([]string{"bench:1", "bench:2", "bench:3"})
			b.ReportAllocs()
			for b.Loop() {
				l, err := m.Lock(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if err := l.Unlock(ctx); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkReplicaAcks alternates uncontended Lock+Unlock on a master with one replica,
// without and with WithReplicaAcks(1, 1s), in the same run, and reports both medians and
// their ratio: the cost of waiting for the replica (two WAITs a pair, one per round trip).
func BenchmarkReplicaAcks(b *testing.B) {
	master := redistest.Start(b, redistest.WithArgs("--repl-diskless-sync-delay", "0"))
	redistest.StartReplica(b, master.Addr)
	plain := dlock.New(master.Client(b))
	defer plain.Close()
	acked := dlock.New(master.Client(b), dlock.WithReplicaAcks(1, 500*time.Millisecond))
	defer acked.Close()
	b.ReportAllocs()
	alternate(b, plain.Mutex("bench:plain"), acked.Mutex("bench:acked"), "no-acks", "acks")
}
