package dlock_test

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// BenchmarkGuard: the cost of one guarded write of a purchase (DECR, INCR, SET) against
// the same commands in a plain pipeline and in a MULTI, on one server and on a Cluster
// (where Guard also checks the keys' slot).
func BenchmarkGuard(b *testing.B) {
	for _, topo := range []struct {
		name string
		rdb  func(b *testing.B) redis.UniversalClient
	}{
		{"standalone", func(b *testing.B) redis.UniversalClient { return redistest.Start(b).Client(b) }},
		{"cluster", func(b *testing.B) redis.UniversalClient { return redistest.StartCluster(b, 3).Client(b) }},
	} {
		b.Run(topo.name, func(b *testing.B) {
			rdb := topo.rdb(b)
			c := dlock.New(rdb)
			defer c.Close()
			ctx := context.Background()
			lease, err := c.Mutex("{bench}").Lock(ctx)
			if err != nil {
				b.Fatal(err)
			}
			defer lease.Unlock(ctx)
			purchase := func(p redis.Pipeliner) error {
				p.Decr(ctx, "{bench}/stock")
				p.Incr(ctx, "{bench}/sold")
				p.Set(ctx, "{bench}/last", "order", 0)
				return nil
			}
			run := func(name string, send func() error) {
				b.Run(name, func(b *testing.B) {
					b.ReportAllocs()
					for b.Loop() {
						if err := send(); err != nil {
							b.Fatal(err)
						}
					}
				})
			}
			run("pipeline", func() error { _, err := rdb.Pipelined(ctx, purchase); return err })
			run("multi", func() error { _, err := rdb.TxPipelined(ctx, purchase); return err })
			run("guard", func() error { _, err := lease.Guard(ctx, purchase); return err })
		})
	}
}
