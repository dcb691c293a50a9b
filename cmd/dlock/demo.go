package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/alicebob/miniredis/v2"
	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// demo runs the flash sale: buyers read the stock, think, and write it back decremented.
// Without a lock two buyers read the same stock and both sell; with the lock each
// read-modify-write happens alone.
func demo(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("dlock demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	redisURL := fs.String("redis", os.Getenv("DLOCK_REDIS"), "Redis server URL; empty for an embedded Redis")
	buyers := fs.Int("buyers", 8, "concurrent buyers")
	stock := fs.Int("stock", 50, "items for sale")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *buyers < 1 || *stock < 1 {
		fmt.Fprintln(stderr, "dlock demo: --buyers and --stock must be at least 1")
		return 2
	}

	rdb, where, cleanup, err := demoRedis(*redisURL)
	if err != nil {
		fmt.Fprintf(stderr, "dlock demo: %v\n", err)
		return 1
	}
	defer cleanup()
	client := dlock.New(rdb)
	defer client.Close()

	fmt.Fprintf(stdout, "Flash sale: %d buyers, %d items, on %s\n\n", *buyers, *stock, where)
	tw := tabwriter.NewWriter(stdout, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "run\tsold\tstock left\toversold\t")
	for _, withLock := range []bool{false, true} {
		sold, left, err := sale(ctx, rdb, client, *buyers, *stock, withLock)
		if err != nil {
			fmt.Fprintf(stderr, "dlock demo: %v\n", err)
			return 1
		}
		name := "without a lock"
		if withLock {
			name = "with dlock"
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t\n", name, sold, left, max(0, sold-*stock))
		if withLock && (sold != *stock || left != 0) {
			tw.Flush()
			fmt.Fprintln(stderr, "dlock demo: the locked sale did not sell exactly the stock")
			return 1
		}
	}
	tw.Flush()
	fmt.Fprintln(stdout, "\nWith dlock every item was sold exactly once.")
	return 0
}

// sale runs one round and returns the units sold and the stock left.
func sale(ctx context.Context, rdb redis.UniversalClient, client *dlock.Client, buyers, stock int, withLock bool) (int, int, error) {
	if err := rdb.MSet(ctx, "demo:stock", stock, "demo:sold", 0).Err(); err != nil {
		return 0, 0, fmt.Errorf("cannot reach Redis: %w", err)
	}
	buy := func(ctx context.Context) (bool, error) {
		left, err := rdb.Get(ctx, "demo:stock").Int()
		if err != nil || left <= 0 {
			return false, err
		}
		time.Sleep(time.Millisecond) // checking the payment: the window for a race
		if err := rdb.Set(ctx, "demo:stock", left-1, 0).Err(); err != nil {
			return false, err
		}
		return true, rdb.Incr(ctx, "demo:sold").Err()
	}
	mutex := client.Mutex("demo:sale")
	var wg sync.WaitGroup
	errs := make(chan error, buyers)
	for range buyers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				var more bool
				var err error
				if withLock {
					err = mutex.Do(ctx, func(ctx context.Context) error {
						more, err = buy(ctx)
						return err
					})
				} else {
					more, err = buy(ctx)
				}
				if err != nil {
					errs <- err
					return
				}
				if !more {
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	if err := errors.Join(drain(errs)...); err != nil {
		return 0, 0, err
	}
	sold, err := rdb.Get(ctx, "demo:sold").Int()
	if err != nil {
		return 0, 0, err
	}
	left, err := rdb.Get(ctx, "demo:stock").Int()
	return sold, left, err
}

func drain(errs <-chan error) []error {
	var out []error
	for err := range errs {
		out = append(out, err)
	}
	return out
}

// demoRedis connects to url, or starts an embedded Redis on a loopback port when url is
// empty. It returns a description of the server without credentials.
func demoRedis(rawURL string) (redis.UniversalClient, string, func(), error) {
	if rawURL == "" {
		mr := miniredis.NewMiniRedis()
		if err := mr.StartAddr("127.0.0.1:0"); err != nil {
			return nil, "", nil, fmt.Errorf("start the embedded Redis: %w", err)
		}
		stop := make(chan struct{})
		go advanceClock(mr, stop) // miniredis expires keys only when told time has passed
		rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
		return rdb, "an embedded Redis (miniredis) at " + mr.Addr(), func() {
			rdb.Close()
			close(stop)
			mr.Close()
		}, nil
	}
	opts, err := redis.ParseURL(rawURL)
	if err != nil {
		return nil, "", nil, fmt.Errorf("bad --redis URL: %v (want redis://[user:password@]host:port[/db] or rediss://)", redactErr(err, rawURL))
	}
	rdb := redis.NewClient(opts)
	return rdb, opts.Addr, func() { rdb.Close() }, nil
}

func advanceClock(mr *miniredis.Miniredis, stop <-chan struct{}) {
	const step = 10 * time.Millisecond
	t := time.NewTicker(step)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			mr.FastForward(step)
		case <-stop:
			return
		}
	}
}

// redactErr returns err's text with the URL's password, if any, replaced.
func redactErr(err error, rawURL string) string {
	msg := err.Error()
	if u, perr := url.Parse(rawURL); perr == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}
