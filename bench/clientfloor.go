package main

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// floorAcquire is the client floor's acquire, SET NX PX as a script, beside its release,
// the SET NX floor's compareAndDelete: a lock's keys and arguments and none of its
// bookkeeping.
var floorAcquire = redis.NewScript(`if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return 1 end return 0`)

// clientFloor measures what the two round trips of an uncontended Lock+Unlock cost the
// client on this machine through dlock's own transport, and nothing else: cfg.Goroutines
// goroutines (loops, as in the throughput scenario, with its context per pair), each
// sending the two scripts above for a key of its own in turn and waiting for each reply,
// through one internal/batch Batcher of one lane over a go-redis client configured as
// dlock's are here (what dlock.New makes for one server), for half of --duration; this
// process's CPU (getrusage) divided by the pairs. What dlock's client CPU per pair in the
// throughput scenario adds to it is the engine's own: tokens, the lease and its renewal
// entry, the votes, the local state.
func (b *bench) clientFloor(res *result) error {
	rdb := dlockClients(openOpts{Addrs: []string{b.single.Addr}})[0]
	defer rdb.Close()
	bt := batch.New(rdb, 1)
	defer bt.Stop()
	n := b.cfg.Goroutines
	keys, dones := make([]string, n), make([]chan *batch.Call, n)
	for g := range n {
		keys[g], dones[g] = "floor:"+strconv.Itoa(g), make(chan *batch.Call, 1)
	}
	call := func(ctx context.Context, script *redis.Script, g int, args ...any) error {
		c := &batch.Call{Script: script, Keys: keys[g : g+1], Args: args, Deadline: time.Now().Add(time.Second), Values: ctx, Done: dones[g]}
		if !bt.Send(c) {
			return batch.ErrStopped
		}
		if c = <-dones[g]; c.Err != nil {
			return c.Err
		} else if c.Val != 1 {
			return fmt.Errorf("%s answered %d, want 1: the key is someone else's", keys[g], c.Val)
		}
		return nil
	}
	var cpu0 time.Duration
	var ok0 bool
	pairs, elapsed, err := loops(n, b.cfg.Duration/2, func(g int) error {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout) // as lockUnlockTimeout's
		defer cancel()
		if err := call(ctx, floorAcquire, g, "floor", 10000); err != nil {
			return err
		}
		return call(ctx, compareAndDelete, g, "floor")
	}, func() { cpu0, ok0 = selfCPU() })
	cpu1, ok1 := selfCPU()
	if err != nil {
		return fmt.Errorf("client floor: %w", err)
	}
	if p := float64(pairs); p > 0 && ok0 && ok1 {
		res.Metrics["floor_client_cpu_us_per_pair"] = float64((cpu1 - cpu0).Nanoseconds()) / 1e3 / p
		res.Metrics["floor_pairs_per_s"] = p / elapsed.Seconds()
	}
	return nil
}
