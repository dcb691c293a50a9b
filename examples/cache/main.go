// Cache shows a cache stampede: many requests miss the same cache key at once. Without a
// lock, every one of them runs the slow database query to rebuild the entry. With dlock,
// one request rebuilds it while the others wait for the lock and then find the entry in
// the cache: a distributed singleflight.
//
// The requests come to several app servers (each a dlock Client with its own Redis
// connections), many at a time on each (goroutines). The cache is a Redis key; the
// "database" is a query that takes 100ms and counts its calls. With the lock, a request
// that misses the cache takes the lock named after the cache key (waiting while another
// request holds it), looks in the cache again, since the holder before it has probably
// filled it, and rebuilds the entry only if it is still missing.
//
// Run it from the repository root:
//
//	go run ./examples/cache
//	go run ./examples/cache --servers 8 --requests 25 --query 200ms
//
// Redis is --redis, else $DLOCK_REDIS, else redis://127.0.0.1:6379, else (when nothing
// answers there) an embedded Redis; --redis embedded asks for that one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/seed51c676c8/dlock/examples/internal/cli"
	"github.com/seed51c676c8/dlock/examples/internal/exredis"
)

func main() { cli.Main("cache", run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("cache", flag.ContinueOnError)
	redisURL := exredis.Flag(fs)
	servers := fs.Int("servers", 4, "app servers, each with its own dlock Client")
	requests := fs.Int("requests", 10, "concurrent requests on each server")
	query := fs.Duration("query", 100*time.Millisecond, "how long the database query that rebuilds the entry takes")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *servers < 1 || *requests < 1 || *servers**requests < 2 || *query <= 0 {
		return errors.New("--servers and --requests must be at least 1, with 2 requests in all, and --query positive")
	}

	srv, err := exredis.Open(ctx, *redisURL)
	if err != nil {
		return err
	}
	defer srv.Close()

	total := *servers * *requests
	fmt.Fprintf(stdout, "Cache stampede: %d requests (%d servers x %d) want %q at once, and the cache is empty.\n",
		total, *servers, *requests, productKey)
	fmt.Fprintf(stdout, "Rebuilding the entry is a database query of %v.\nRedis: %s\n\n", *query, srv.Desc)
	fmt.Fprintf(stdout, "%-16s %10s %12s %17s\n", "run", "db queries", "cache hits", "slowest request")
	for _, withLock := range []bool{false, true} {
		r, err := stampede(ctx, srv, *servers, *requests, *query, withLock)
		if err != nil {
			return err
		}
		name := "without a lock"
		if withLock {
			name = "with dlock"
		}
		fmt.Fprintf(stdout, "%-16s %10d %12d %17v\n", name, r.queries, r.hits, r.slowest.Round(time.Millisecond))
		if withLock && r.queries != 1 {
			return fmt.Errorf("with dlock the entry was rebuilt %d times", r.queries)
		}
	}
	fmt.Fprintf(stdout, "\nWith dlock the database saw one query; the other requests waited for it and read the cache.\n")
	return nil
}
