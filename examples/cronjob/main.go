// Cronjob shows a scheduled job that several hosts fire at the same ticks: without a lock
// it runs once per host per tick, with dlock once per tick.
//
// The hosts are separate processes: the example starts its own program again, once per
// host. Every host has the same schedule (by default every 200ms for 2s) and fires the
// job ("send the report": 20ms) at every tick. Without a lock, each host runs it. With
// dlock, at each tick every host calls TryLock on a lock named after the tick, so that
// they all try the same lock for the same tick: one gets it and runs the job, the others
// get ErrNotAcquired and skip the tick. The winner keeps the lock for the first half of
// the tick's period, the time within which a host may still start the tick (a timer that
// fires later missed the tick), so that a late host finds it taken and not free again.
//
// Run it from the repository root:
//
//	go run ./examples/cronjob
//	go run ./examples/cronjob --hosts 5 --every 500ms --for 5s
//
// Redis is --redis, else $DLOCK_REDIS, else redis://127.0.0.1:6379, else (when nothing
// answers there) an embedded Redis, which the hosts reach on a loopback port; --redis
// embedded asks for that one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/seed51c676c8/dlock/examples/internal/cli"
	"github.com/seed51c676c8/dlock/examples/internal/exredis"
)

func main() {
	if cfg := os.Getenv(hostEnv); cfg != "" {
		os.Exit(hostMain(cfg)) // this process is one of the hosts
	}
	cli.Main("cronjob", run)
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("cronjob", flag.ContinueOnError)
	redisURL := exredis.Flag(fs)
	hosts := fs.Int("hosts", 3, "host processes")
	every := fs.Duration("every", 200*time.Millisecond, "the schedule: a tick every this often")
	span := fs.Duration("for", 2*time.Second, "how long the schedule runs")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	ticks := int(*span / *every)
	if *hosts < 2 || *every < 50*time.Millisecond || ticks < 1 || ticks > 1000 {
		return errors.New("--hosts must be at least 2, --every at least 50ms, and --for from 1 to 1000 times --every")
	}

	srv, err := exredis.Open(ctx, *redisURL)
	if err != nil {
		return err
	}
	defer srv.Close()

	fmt.Fprintf(stdout, "Cron job \"send the report\" on %d hosts (separate processes), every %v for %v: %d ticks.\n",
		*hosts, *every, *span, ticks)
	fmt.Fprintf(stdout, "Redis: %s\n\n", srv.Desc)
	without, err := schedule(ctx, srv, *hosts, *every, ticks, false)
	if err != nil {
		return fmt.Errorf("without a lock: %w", err)
	}
	with, err := schedule(ctx, srv, *hosts, *every, ticks, true)
	if err != nil {
		return fmt.Errorf("with dlock: %w", err)
	}

	fmt.Fprintf(stdout, "Runs of the job per tick, and the hosts that ran it:\n\n")
	list := func(hs []string) string {
		slices.Sort(hs)
		return "(" + strings.Join(hs, " ") + ")"
	}
	width := len("without a lock") - 3
	for _, r := range without {
		width = max(width, len(list(r.ran)))
	}
	fmt.Fprintf(stdout, "%4s  %-*s  %s\n", "tick", width+3, "without a lock", "with dlock")
	var totalWithout, totalWith int
	var wrong, missed []string
	for i := range ticks {
		a, b := without[i], with[i]
		fmt.Fprintf(stdout, "%4d  %d  %-*s  %d  %s\n", i+1, len(a.ran), width, list(a.ran), len(b.ran), list(b.ran))
		totalWithout += len(a.ran)
		totalWith += len(b.ran)
		if len(b.ran) > 1 {
			wrong = append(wrong, fmt.Sprintf("tick %d ran %d times", i+1, len(b.ran)))
		}
		for _, h := range a.missed {
			missed = append(missed, fmt.Sprintf("%s missed tick %d without a lock", h, i+1))
		}
		for _, h := range b.missed {
			missed = append(missed, fmt.Sprintf("%s missed tick %d with dlock", h, i+1))
		}
	}
	fmt.Fprintf(stdout, "%-5s %-*d  %d\n\n", "total", width+3, totalWithout, totalWith)
	for _, m := range missed {
		fmt.Fprintf(stdout, "(%s: its timer fired more than %v late)\n", m, *every/2)
	}
	if len(wrong) > 0 {
		return fmt.Errorf("with dlock: %s", strings.Join(wrong, ", "))
	}
	fmt.Fprintf(stdout, "Without a lock the job ran %d times for %d ticks; with dlock, %d times.\n", totalWithout, ticks, totalWith)
	return nil
}
