package main

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// The client floor's two scripts: a lock's acquire and compare-and-delete release, with a
// lock's keys and arguments and none of its bookkeeping.
var (
	floorAcquire = redis.NewScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0`)
	floorRelease = redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
)

// clientFloor measures what the two round trips of an uncontended Lock+Unlock cost the
// client on this machine through dlock's own transport, and nothing else: cfg.Goroutines
// goroutines, each sending the two scripts above for a key of its own in turn, through
// one internal/batch Batcher of one lane over a go-redis client configured as dlock's
// are here (what dlock.New makes for one server), for half of --duration; this process's
// CPU (getrusage) divided by the pairs. What dlock's client CPU per pair in the
// throughput scenario adds to it is the engine's own: tokens, the lease and its renewal
// entry, the wait for each reply, the local state.
func (b *bench) clientFloor(ctx context.Context, res *result) error {
	rdb := dlockClients(openOpts{Addrs: []string{b.single.Addr}})[0]
	defer rdb.Close()
	bt := batch.New(rdb, 1)
	defer bt.Stop()
	pair := func(key string, done chan *batch.Call) error {
		for i, script := range []*redis.Script{floorAcquire, floorRelease} {
			c := &batch.Call{Script: script, Keys: []string{key}, Args: []any{"floor", 10000},
				Deadline: time.Now().Add(time.Second), Done: done}
			if i == 1 {
				c.Args = c.Args[:1]
			}
			if !bt.Send(c) {
				return batch.ErrStopped
			}
			if c = <-done; c.Err != nil {
				return c.Err
			} else if c.Val != 1 {
				return fmt.Errorf("%s answered %d, want 1: the key is someone else's", key, c.Val)
			}
		}
		return nil
	}
	n := b.cfg.Goroutines
	for g := range n { // warm-up: connections, scripts
		if err := pair("floor:"+strconv.Itoa(g), make(chan *batch.Call, 1)); err != nil {
			return fmt.Errorf("client floor: %w", err)
		}
	}
	var (
		pairs   atomic.Int64
		stop    atomic.Bool
		wg      sync.WaitGroup
		errOnce sync.Once
		first   error
	)
	cpu0, ok0 := selfCPU()
	t0 := time.Now()
	for g := range n {
		wg.Go(func() {
			key, done := "floor:"+strconv.Itoa(g), make(chan *batch.Call, 1)
			for !stop.Load() {
				if err := pair(key, done); err != nil {
					errOnce.Do(func() { first = err })
					return
				}
				pairs.Add(1)
			}
		})
	}
	time.Sleep(b.cfg.Duration / 2)
	stop.Store(true)
	wg.Wait()
	elapsed := time.Since(t0)
	cpu1, ok1 := selfCPU()
	if first != nil {
		return fmt.Errorf("client floor: %w", first)
	}
	if p := float64(pairs.Load()); p > 0 && ok0 && ok1 {
		res.Metrics["floor_client_cpu_us_per_pair"] = float64((cpu1 - cpu0).Nanoseconds()) / 1e3 / p
		res.Metrics["floor_pairs_per_s"] = p / elapsed.Seconds()
	}
	return nil
}
