// Leader shows a singleton worker: several processes run the same worker, an Election lets
// exactly one of them work at a time, and the others (and anyone else) observe who it is.
//
// The workers are separate processes: the example starts its own program again, once per
// worker. Each calls Election.Run: it campaigns, and while it leads it does the work (a
// step every 50ms, each recorded with its term's fencing token), until its term ends.
// The example observes the election (Election.Observe) and prints every change of leader.
// Part-way through it kills the leading process (SIGKILL, no goodbye): its term expires
// after the TTL, a waiting worker takes over, and the observer sees the new leader. At the
// end the steps are checked: one worker at a time, terms in order.
//
// Run it from the repository root:
//
//	go run ./examples/leader
//	go run ./examples/leader --workers 5 --ttl 500ms --for 5s
//
// Redis is --redis, else $DLOCK_REDIS, else redis://127.0.0.1:6379, else (when nothing
// answers there) an embedded Redis, which the workers reach on a loopback port; --redis
// embedded asks for that one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/seed51c676c8/dlock/examples/internal/cli"
	"github.com/seed51c676c8/dlock/examples/internal/exredis"
)

func main() {
	if cfg := os.Getenv(workerEnv); cfg != "" {
		os.Exit(workerMain(cfg)) // this process is one of the workers
	}
	cli.Main("leader", run)
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("leader", flag.ContinueOnError)
	redisURL := exredis.Flag(fs)
	workers := fs.Int("workers", 3, "worker processes")
	ttl := fs.Duration("ttl", time.Second, "the terms' TTL: how soon a dead leader is replaced")
	span := fs.Duration("for", 4*time.Second, "how long the workers run; the first leader is killed after a third of it")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *workers < 2 || *ttl < 100*time.Millisecond || *span < 3**ttl || *span > 10*time.Minute {
		return errors.New("--workers must be at least 2, --ttl at least 100ms, and --for from 3 times --ttl to 10m")
	}
	srv, err := exredis.Open(ctx, *redisURL)
	if err != nil {
		return err
	}
	defer srv.Close()

	fmt.Fprintf(stdout, "A singleton worker in %d processes, TTL %v, for %v; the first leader is killed after %v.\n",
		*workers, *ttl, *span, (*span / 3).Round(time.Millisecond))
	fmt.Fprintf(stdout, "Redis: %s\n\n", srv.Desc)
	return demo(ctx, srv, stdout, *workers, *ttl, *span)
}
