package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/engine"
)

// demoBuyerCommand is the hidden command that runs one buyer of the demo.
const demoBuyerCommand = "demo-buyer"

// buyerTimeout bounds a buyer's whole life.
const buyerTimeout = 60 * time.Second

// cmdDemoBuyer buys until the stock is gone, then prints "done {json}". Modes: nolock
// (read, pay, write, as they come), lock (each purchase under the Mutex), guarded (under
// the Mutex, the purchase's writes sent with Lease.Guard) and fenced (under the Mutex,
// every store request carrying the fencing token). With --pause, in its first
// purchase, between the read and the write, the buyer prints "paused TOKEN" and goes on
// only when the demo says "resume"; meanwhile the demo freezes it (SIGSTOP) past its
// lease, and wakes it (SIGCONT) once a newer holder has reached the store.
func cmdDemoBuyer(c *cli, args []string) error {
	fs := newFlagSet(demoBuyerCommand)
	mode := fs.String("mode", "lock", "nolock, lock, guarded or fenced")
	ttl := fs.Duration("ttl", dlock.DefaultTTL, "lease length")
	pause := fs.Bool("pause", false, "freeze in the first purchase")
	prefix := fs.String("prefix", engine.DefaultPrefix, "key namespace")
	cluster := fs.Bool("cluster", false, "Redis Cluster")
	if _, _, _, err := parseArgs(fs, demoBuyerCommand, args, 0); err != nil {
		return err
	}
	if *mode != "nolock" && *mode != "lock" && *mode != "guarded" && *mode != "fenced" {
		return usage(demoBuyerCommand, "unknown --mode %q", *mode)
	}
	srv, err := workerServers(c, *cluster)
	if err != nil {
		return usage(demoBuyerCommand, "%v", err)
	}
	d := srv.open()
	defer d.Close()
	client, err := d.client(*prefix, slogDiscard())
	if err != nil {
		return err
	}
	defer client.Close()
	store := d.nodes[0].rdb

	side := &workerSide{out: c.stdout}
	if err := side.ready(c.stdin); err != nil {
		return fail(exitFailure, "%v", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), buyerTimeout)
	defer cancel()
	b := &buyer{store: store, side: side, pause: *pause, mode: *mode}
	mutex := client.Mutex(demoLockName, dlock.TTL(max(*ttl, dlock.MinTTL)))
	for {
		var lease *dlock.Lease
		if *mode != "nolock" {
			if lease, err = lockRetrying(ctx, mutex); err != nil {
				return fail(exitFailure, "lock: %v", err)
			}
		}
		more, err := b.buyOnce(ctx, lease)
		if lease != nil {
			uctx, ucancel := context.WithTimeout(context.Background(), engine.UnlockTimeout)
			uerr := lease.Unlock(uctx)
			ucancel()
			if uerr != nil && !errors.Is(uerr, dlock.ErrNotHeld) {
				return fail(exitFailure, "unlock: %v", uerr)
			}
		}
		if err != nil {
			return fail(exitFailure, "%v", err)
		}
		if !more {
			break
		}
	}
	side.say("done %s", b.report)
	return nil
}

// buyer is one buyer's state.
type buyer struct {
	store  redis.Cmdable
	side   *workerSide
	pause  bool   // freeze in the next purchase
	mode   string // as --mode
	report buyerReport
}

// buyOnce makes one purchase under lease (nil in mode nolock): read the stock, take the
// payment (1ms: the window in which others can read the same stock), take one item. It
// reports whether to go on: false once the stock is gone. A request refused for a stale
// token, or a guarded write refused, counts as refused and goes on.
func (b *buyer) buyOnce(ctx context.Context, lease *dlock.Lease) (bool, error) {
	var token uint64 // the fencing token the store checks; 0 for none
	if b.mode == "fenced" {
		token = lease.Token()
	}
	left, err := storeRead(ctx, b.store, token)
	switch {
	case errors.Is(err, errStale):
		return true, nil
	case err != nil:
		return false, fmt.Errorf("read the stock: %w", err)
	case left <= 0:
		return false, nil
	}
	if b.pause {
		b.pause = false
		b.side.say("paused %d", lease.Token())
		if err := b.side.wait(ctx, "resume"); err != nil {
			return false, err
		}
	}
	time.Sleep(time.Millisecond) // taking the payment
	buy := func() error { return storeBuy(ctx, b.store, token) }
	if b.mode == "guarded" {
		buy = func() error { return storeBuyGuarded(ctx, b.store, lease) }
	}
	switch err := buy(); {
	case errors.Is(err, errStale):
		b.report.Refused++
	case err != nil:
		return false, fmt.Errorf("take an item: %w", err)
	default:
		b.report.Bought++
	}
	return true, nil
}

// lockRetrying locks m, retrying failed attempts (a loaded machine can make the short
// leases of round 3 time out) until ctx ends.
func lockRetrying(ctx context.Context, m *dlock.Mutex) (*dlock.Lease, error) {
	for {
		lease, err := m.Lock(ctx)
		if err == nil || ctx.Err() != nil {
			return lease, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(10 * time.Millisecond):
		}
	}
}
