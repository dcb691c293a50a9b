package main

import (
	"context"
	"fmt"
	"runtime"
	"time"
)

// requestPeriod is the pace of the request floor: a hot key's period, the 1 ms hold and a
// quarter more (the Mutex in one process grants about 800 times a second here).
func (c benchConfig) requestPeriod() time.Duration { return c.Hold + c.Hold/4 }

// requestFloor measures what one request costs redis-server when requests come one at a
// time at a hot key's pace: a PING every requestPeriod, each sent once the last is
// answered, for half of --duration; redis-server's CPU over them (processCPU) divided by
// their number. A grant that sends a request of its own to an idle server costs it about
// this much before any script runs: a FairMutex grant in strict order sends at least its
// waiter's enqueue, and the Mutex in one process hands most grants on without a request
// (scripts per grant in the hot-key rows). The
// pacing sleeps with nanosleep on a locked thread: the runtime's timers sleep whole ms.
func (b *bench) requestFloor(ctx context.Context, res *result) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	fineTimerSlack()
	rdb := b.admin(b.single.Addr)
	if err := rdb.Ping(ctx).Err(); err != nil { // connected before the clock starts
		return fmt.Errorf("PING: %w", err)
	}
	period := b.cfg.requestPeriod()
	n := max(10, int(b.cfg.Duration/2/period))
	cpu0, ok0 := processCPU(b.single.PID())
	next := time.Now()
	for i := range n {
		if err := rdb.Ping(ctx).Err(); err != nil {
			return fmt.Errorf("PING %d: %w", i, err)
		}
		next = next.Add(period)
		if d := time.Until(next); d > 0 {
			preciseSleep(d)
		}
	}
	cpu1, ok1 := processCPU(b.single.PID())
	if ok0 && ok1 {
		res.Metrics["request_server_cpu_us"] = float64((cpu1 - cpu0).Nanoseconds()) / 1e3 / float64(n)
		res.Metrics["request_period_us"] = float64(period.Microseconds())
		res.Metrics["requests"] = float64(n)
	}
	return nil
}
