package main

import (
	"context"
	_ "embed"
	"errors"
	"strconv"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// The flash-sale store: a stock and a count of sales in Redis, read and written by the
// buyers. Its keys share a hash tag, with each other and with the lock (demoLockName), so
// that its scripts, and Guard, run on a Cluster too.
var demoKeys = struct {
	stock, sold, lastToken, refused string
}{
	stock:     "dlock-demo:{flash-sale}:stock",
	sold:      "dlock-demo:{flash-sale}:sold",
	lastToken: "dlock-demo:{flash-sale}:last-token",
	refused:   "dlock-demo:{flash-sale}:refused",
}

var (
	//go:embed scripts/demo_read.lua
	demoReadSource string
	demoReadScript = redis.NewScript(demoReadSource)
	//go:embed scripts/demo_buy.lua
	demoBuySource string
	demoBuyScript = redis.NewScript(demoBuySource)
)

// errStale is the store's refusal of a request that carries a stale fencing token, or a
// guarded write refused.
var errStale = errors.New("refused: the writer no longer holds the lock (a stale fencing token, or a guarded write after its lease)")

// storeRead returns the stock; token 0 means no fencing.
func storeRead(ctx context.Context, rdb redis.Cmdable, token uint64) (int64, error) {
	n, err := demoReadScript.Run(ctx, rdb, []string{demoKeys.stock, demoKeys.lastToken}, token).Int64()
	if err == redis.Nil {
		return 0, errStale
	}
	return n, err
}

// storeBuy takes one item; token 0 means no fencing.
func storeBuy(ctx context.Context, rdb redis.Cmdable, token uint64) error {
	n, err := demoBuyScript.Run(ctx, rdb, []string{demoKeys.stock, demoKeys.sold, demoKeys.lastToken, demoKeys.refused}, token).Int64()
	if err == nil && n == 0 {
		return errStale
	}
	return err
}

// storeBuyGuarded takes one item with lease.Guard, so that Redis applies it only while
// lease holds the lock, and records the lease's token as the newest to reach the store.
// Refused, it counts the refusal, outside the guard (a record for the demo, not a sale),
// and returns errStale.
func storeBuyGuarded(ctx context.Context, rdb redis.Cmdable, lease *dlock.Lease) error {
	_, err := lease.Guard(ctx, func(p redis.Pipeliner) error {
		p.Decr(ctx, demoKeys.stock)
		p.Incr(ctx, demoKeys.sold)
		p.Set(ctx, demoKeys.lastToken, lease.Token(), 0)
		return nil
	})
	if errors.Is(err, dlock.ErrNotHeld) {
		if err := rdb.Incr(ctx, demoKeys.refused).Err(); err != nil {
			return err
		}
		return errStale
	}
	return err
}

// storeReset sets the stock and clears the counters.
func storeReset(ctx context.Context, rdb redis.Cmdable, stock int) error {
	if err := storeDelete(ctx, rdb); err != nil {
		return err
	}
	return rdb.Set(ctx, demoKeys.stock, stock, 0).Err()
}

// storeDelete removes the store's keys.
func storeDelete(ctx context.Context, rdb redis.Cmdable) error {
	return rdb.Del(ctx, demoKeys.stock, demoKeys.sold, demoKeys.lastToken, demoKeys.refused).Err()
}

// storeCounts reads the stock, the sales, the refusals and the largest token seen.
func storeCounts(ctx context.Context, rdb redis.Cmdable) (stock, sold, refused, lastToken int64, err error) {
	vals, err := rdb.MGet(ctx, demoKeys.stock, demoKeys.sold, demoKeys.refused, demoKeys.lastToken).Result()
	if err != nil {
		return 0, 0, 0, 0, err
	}
	n := make([]int64, len(vals))
	for i, v := range vals {
		if s, ok := v.(string); ok {
			n[i], _ = strconv.ParseInt(s, 10, 64)
		}
	}
	return n[0], n[1], n[2], n[3], nil
}
