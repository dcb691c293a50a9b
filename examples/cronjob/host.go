package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// hostEnv is set, to the host's configuration in JSON, in the environment of a host
// process: the example's own binary, started again by run.
const hostEnv = "DLOCK_EXAMPLE_CRONJOB_HOST"

// hostConfig tells a host what to do.
type hostConfig struct {
	Name  string        `json:"name"`
	Redis string        `json:"redis"` // URL
	Run   string        `json:"run"`   // namespace of this run's keys in Redis
	Every time.Duration `json:"every"`
	Ticks int           `json:"ticks"`
	Lock  bool          `json:"lock"`
}

// jobTime is how long the job takes.
const jobTime = 20 * time.Millisecond

// window is how late a host may start a tick: a timer that fires later than this missed
// the tick, and the host skips it, as schedulers do with missed runs. A lock holder keeps
// the tick's lock until the window has passed, so that no host can start the tick after
// the holder released it.
func (c hostConfig) window() time.Duration { return c.Every / 2 }

// ranKey lists the hosts that ran tick i; missedKey those that skipped it as missed.
func ranKey(run string, i int) string    { return fmt.Sprintf("example:cronjob:%s:ran:%d", run, i) }
func missedKey(run string, i int) string { return fmt.Sprintf("example:cronjob:%s:missed:%d", run, i) }

// hostMain runs a host process and returns its exit code.
func hostMain(cfgJSON string) int {
	var cfg hostConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "cronjob host: bad %s: %v\n", hostEnv, err)
		return 2
	}
	if err := host(cfg, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.Name, err)
		return 1
	}
	return 0
}

// host is one machine with a scheduler: it connects, says "ready", reads the schedule's
// start (Unix nanoseconds) from stdin, then fires the job at every tick.
func host(cfg hostConfig, stdin io.Reader, stdout io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute+time.Duration(cfg.Ticks)*cfg.Every)
	defer cancel()
	opts, err := redis.ParseURL(cfg.Redis)
	if err != nil {
		return err
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	if err := rdb.Ping(ctx).Err(); err != nil {
		return err
	}
	client := dlock.New(rdb)
	defer client.Close()

	fmt.Fprintln(stdout, "ready")
	line, err := bufio.NewReader(stdin).ReadString('\n')
	if err != nil {
		return fmt.Errorf("waiting for the start: %w", err)
	}
	ns, err := strconv.ParseInt(strings.TrimSpace(line), 10, 64)
	if err != nil {
		return fmt.Errorf("bad start %q: %w", line, err)
	}
	start := time.Unix(0, ns)

	for i := range cfg.Ticks {
		at := start.Add(time.Duration(i) * cfg.Every)
		if err := sleepUntil(ctx, at); err != nil {
			return err
		}
		if late := time.Since(at); late > cfg.window() {
			fmt.Fprintf(stdout, "tick %d: missed, the timer fired %v late\n", i, late.Round(time.Millisecond))
			if err := rdb.RPush(ctx, missedKey(cfg.Run, i), cfg.Name).Err(); err != nil {
				return err
			}
			continue
		}
		if !cfg.Lock {
			if err := job(ctx, rdb, cfg, i); err != nil {
				return err
			}
			fmt.Fprintf(stdout, "tick %d: ran the job\n", i)
			continue
		}

		// Every host names the lock after the tick, so they all try the same lock for
		// the same tick, and a new lock for the next one.
		name := fmt.Sprintf("example:cronjob:report:%d", at.UnixMilli())
		lease, err := client.Mutex(name).TryLock(ctx)
		if errors.Is(err, dlock.ErrNotAcquired) {
			fmt.Fprintf(stdout, "tick %d: skipped, another host has it\n", i)
			continue
		}
		if err != nil {
			return err
		}
		if err := job(lease.Context(), rdb, cfg, i); err != nil {
			return err
		}
		fmt.Fprintf(stdout, "tick %d: ran the job, token %d\n", i, lease.Token())
		// Hold the lock until no host can start this tick any more: a host whose timer
		// fires late must find it taken, not free.
		if err := sleepUntil(ctx, at.Add(cfg.window())); err != nil {
			return err
		}
		if err := lease.Unlock(ctx); err != nil {
			return err
		}
	}
	return nil
}

// job is the scheduled job: it sends the report, and records that this host ran it.
func job(ctx context.Context, rdb *redis.Client, cfg hostConfig, i int) error {
	time.Sleep(jobTime) // sending the report
	if err := rdb.RPush(ctx, ranKey(cfg.Run, i), cfg.Name).Err(); err != nil {
		return err
	}
	return nil
}

func sleepUntil(ctx context.Context, t time.Time) error {
	timer := time.NewTimer(time.Until(t))
	defer timer.Stop()
	select {
	case <-timer.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
