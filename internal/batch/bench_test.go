package batch

import (
	"runtime"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// go test -run '^$' -bench . -benchmem ./internal/batch/

// benchCalls sends script calls from 32 goroutines (16 per CPU on two CPUs), each waiting
// for its reply before the next, as Lock+Unlock callers do.
func benchCalls(b *testing.B, newBatcher func(*redis.Client) *Batcher) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	bt := newBatcher(rdb)
	defer bt.Stop()
	b.ReportAllocs()
	b.SetParallelism(32 / max(1, testingProcs()))
	b.ResetTimer()
	defer redistest.ReportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		done := make(chan *Call, 1)
		c := &Call{Script: echo, Args: []any{"7"}}
		for pb.Next() {
			c.Done = done
			if !bt.Send(c) {
				b.Error("Send = false")
				return
			}
			if c := <-done; c.Err != nil || c.Val != 7 {
				b.Errorf("reply %d, %v", c.Val, c.Err)
				return
			}
		}
	})
}

// BenchmarkAuto: go-redis' AutoPipeliner, 4 collectors.
func BenchmarkAuto(b *testing.B) {
	benchCalls(b, func(rdb *redis.Client) *Batcher { return autoPipeline(rdb, 4) })
}

// BenchmarkGoRedis: go-redis pipelines over 4 lanes, as for a Cluster.
func BenchmarkGoRedis(b *testing.B) {
	benchCalls(b, func(rdb *redis.Client) *Batcher { return goredis(rdb, 4) })
}

// BenchmarkGoRedisPlain: one go-redis EVALSHA per call from each goroutine, no batcher: what
// the peer libraries pay.
func BenchmarkGoRedisPlain(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	if err := echo.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.SetParallelism(32 / max(1, testingProcs()))
	b.ResetTimer()
	defer redistest.ReportCPU(b)()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if v, err := echo.EvalSha(ctx, rdb, nil, "7").Int64(); err != nil || v != 7 {
				b.Errorf("reply %d, %v", v, err)
				return
			}
		}
	})
}

func testingProcs() int { return runtime.GOMAXPROCS(0) }

// BenchmarkSerial: one goroutine, one call at a time: the latency of a round trip.
func BenchmarkSerial(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	bt := New(rdb, 4)
	defer bt.Stop()
	done := make(chan *Call, 1)
	c := &Call{Script: echo, Args: []any{"7"}}
	b.ReportAllocs()
	for b.Loop() {
		c.Done = done
		bt.Send(c)
		if c := <-done; c.Err != nil || c.Val != 7 {
			b.Fatalf("reply %d, %v", c.Val, c.Err)
		}
	}
}

// BenchmarkRunSerial is BenchmarkSerial with TryRun on a client with
// ContextTimeoutEnabled: the caller sends its call itself, with no hand-off.
func BenchmarkRunSerial(b *testing.B) {
	srv := redistest.Start(b)
	opt := srv.Options()
	opt.ContextTimeoutEnabled = true
	rdb := redis.NewClient(opt)
	defer rdb.Close()
	bt := New(rdb, 4)
	defer bt.Stop()
	done := make(chan *Call, 1)
	c := &Call{Script: echo, Args: []any{"7"}}
	b.ReportAllocs()
	for b.Loop() {
		c.Done, c.Deadline = done, time.Now().Add(time.Second)
		bt.TryRun(c)
		if c := <-done; c.Err != nil || c.Val != 7 {
			b.Fatalf("reply %d, %v", c.Val, c.Err)
		}
	}
}

// BenchmarkGoRedisSerial: one goroutine, one go-redis EVALSHA at a time.
func BenchmarkGoRedisSerial(b *testing.B) {
	srv := redistest.Start(b)
	rdb := srv.Client(b)
	if err := echo.Load(ctx, rdb).Err(); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if v, err := echo.EvalSha(ctx, rdb, nil, "7").Int64(); err != nil || v != 7 {
			b.Fatalf("reply %d, %v", v, err)
		}
	}
}

// BenchmarkAutoFullDuplex: go-redis' AutoPipeliner in full-duplex mode.
func BenchmarkAutoFullDuplex(b *testing.B) {
	benchCalls(b, func(rdb *redis.Client) *Batcher {
		rdb.Options().AutoPipelineOptions = &redis.AutoPipelineOptions{FullDuplex: true}
		return autoPipeline(rdb, 4)
	})
}

// BenchmarkSeenSHAOnCluster is the cost of choosing EVAL or EVALSHA for a call on a
// Cluster, where a script counts as sent per master (seen.master: the client's slot map
// asked for the call's first key), against the same choice elsewhere.
func BenchmarkSeenSHAOnCluster(b *testing.B) {
	rdb := redistest.StartCluster(b, 3).Client(b)
	for _, bc := range []struct {
		name string
		sn   *seen
	}{{"cluster", &seen{cluster: rdb}}, {"one server", &seen{}}} {
		b.Run(bc.name, func(b *testing.B) {
			c := &Call{Script: echo, Keys: []string{"{dlock:bench}:k"}}
			bc.sn.sha(ctx, c) // sent once
			b.ReportAllocs()
			for b.Loop() {
				if _, ok := bc.sn.sha(ctx, c); !ok {
					b.Fatal("counted as never sent")
				}
			}
		})
	}
}
