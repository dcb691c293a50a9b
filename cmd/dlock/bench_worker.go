package main

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/engine"
)

// benchWorkerCommand is the hidden command that runs one worker process of the bench.
const benchWorkerCommand = "bench-worker"

// benchReport is what a worker reports to the bench, as JSON on one "done" line.
type benchReport struct {
	Ops       int64   `json:"ops"`      // Lock+Unlock pairs completed
	WaitsUS   []int64 `json:"waits_us"` // hot: each acquisition's wait, in microseconds
	HeldNS    int64   `json:"held_ns"`  // hot: the hold times summed
	ElapsedNS int64   `json:"elapsed_ns"`
	Errors    int64   `json:"errors"`
	FirstErr  string  `json:"first_error,omitempty"`
}

// benchWorker holds the flags of one worker.
type benchWorker struct {
	phase      string // "free": each goroutine its own lock; "hot": one lock for all
	goroutines int
	hold       time.Duration
	duration   time.Duration
	run        string // the bench's run id: the locks' names
	id         int    // this worker's number
	prefix     string
	cluster    bool
	kind       string // "mutex" or "fair"
}

func cmdBenchWorker(c *cli, args []string) error {
	bw := new(benchWorker)
	fs := newFlagSet(benchWorkerCommand)
	fs.StringVar(&bw.phase, "phase", "hot", "free or hot")
	fs.IntVar(&bw.goroutines, "goroutines", 1, "goroutines")
	fs.DurationVar(&bw.hold, "hold", time.Millisecond, "critical section")
	fs.DurationVar(&bw.duration, "duration", time.Second, "how long")
	fs.StringVar(&bw.run, "run", "x", "run id")
	fs.IntVar(&bw.id, "id", 0, "worker number")
	fs.StringVar(&bw.prefix, "prefix", engine.DefaultPrefix, "key namespace")
	fs.BoolVar(&bw.cluster, "cluster", false, "Redis Cluster")
	fs.StringVar(&bw.kind, "kind", "mutex", "mutex or fair")
	if _, _, _, err := parseArgs(fs, benchWorkerCommand, args, 0); err != nil {
		return err
	}
	srv, err := workerServers(c, bw.cluster)
	if err != nil {
		return usage(benchWorkerCommand, "%v", err)
	}
	d := srv.open()
	defer d.Close()
	if err := d.check(context.Background(), func(string) {}); err != nil {
		return err
	}
	client, err := d.client(bw.prefix, slogDiscard())
	if err != nil {
		return err
	}
	defer client.Close()
	side := &workerSide{out: c.stdout}
	if err := side.ready(c.stdin); err != nil {
		return fail(exitFailure, "%v", err)
	}
	report := bw.measure(client)
	b, err := json.Marshal(report)
	if err != nil {
		return err
	}
	side.say("done %s", b)
	return nil
}

// measure runs the goroutines until the duration has passed.
func (bw *benchWorker) measure(client *dlock.Client) benchReport {
	start := time.Now()
	ctx, cancel := context.WithDeadline(context.Background(), start.Add(bw.duration))
	defer cancel()
	var (
		mu     sync.Mutex
		report benchReport
		wg     sync.WaitGroup
	)
	for g := range bw.goroutines {
		wg.Go(func() {
			name := benchHotName(bw.run)
			if bw.phase == "free" {
				name = fmt.Sprintf("bench:%s:free:%d:%d", bw.run, bw.id, g)
			}
			var l locker = client.Mutex(name)
			if bw.kind == "fair" {
				l = client.FairMutex(name)
			}
			r := bw.loop(ctx, l)
			mu.Lock()
			defer mu.Unlock()
			report.Ops += r.Ops
			report.WaitsUS = append(report.WaitsUS, r.WaitsUS...)
			report.HeldNS += r.HeldNS
			report.Errors += r.Errors
			if report.FirstErr == "" {
				report.FirstErr = r.FirstErr
			}
		})
	}
	wg.Wait()
	report.ElapsedNS = int64(time.Since(start))
	return report
}

// locker is what a worker locks: a Mutex or a FairMutex.
type locker interface {
	Lock(ctx context.Context) (*dlock.Lease, error)
}

// benchHotName is the name of the hot lock of a run.
func benchHotName(run string) string { return "bench:" + run + ":hot" }

// loop locks, holds and unlocks until ctx ends, recording each wait and hold.
func (bw *benchWorker) loop(ctx context.Context, m locker) benchReport {
	var r benchReport
	for ctx.Err() == nil {
		t0 := time.Now()
		lease, err := m.Lock(ctx)
		if err != nil {
			if ctx.Err() == nil {
				r.Errors++
				if r.FirstErr == "" {
					r.FirstErr = err.Error()
				}
				time.Sleep(10 * time.Millisecond)
			}
			continue
		}
		t1 := time.Now()
		if bw.hold > 0 {
			time.Sleep(bw.hold)
		}
		uctx, cancel := context.WithTimeout(context.Background(), engine.UnlockTimeout)
		err = lease.Unlock(uctx)
		cancel()
		t2 := time.Now()
		if err != nil {
			r.Errors++
			if r.FirstErr == "" {
				r.FirstErr = err.Error()
			}
			continue
		}
		r.Ops++
		if bw.phase == "hot" {
			r.WaitsUS = append(r.WaitsUS, int64(t1.Sub(t0)/time.Microsecond))
			r.HeldNS += int64(t2.Sub(t1))
		}
	}
	return r
}
