package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/examples/internal/exredis"
)

// productKey is the cache key every request wants.
const productKey = "example:cache:product:42"

// cacheTTL is how long an entry stays in the cache.
const cacheTTL = time.Minute

// database is the slow source of truth. It counts its queries.
type database struct {
	delay   time.Duration
	queries atomic.Int64
}

// loadProduct is the expensive query that rebuilds the cache entry.
func (db *database) loadProduct(ctx context.Context) (string, error) {
	db.queries.Add(1)
	select {
	case <-time.After(db.delay):
		return `{"id":42,"name":"game console","price":499}`, nil
	case <-ctx.Done():
		return "", ctx.Err()
	}
}

// result is what a stampede did.
type result struct {
	queries int64         // database queries: rebuilds of the entry
	hits    int           // requests served from the cache
	slowest time.Duration // the longest request
}

// stampede empties the cache, then lets servers x requests requests want the product at
// the same moment.
func stampede(ctx context.Context, srv *exredis.Server, servers, requests int, query time.Duration, withLock bool) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute) // the example never hangs
	defer cancel()
	admin := srv.NewClient()
	defer admin.Close()
	if err := admin.Del(ctx, productKey).Err(); err != nil {
		return result{}, err
	}
	db := &database{delay: query}
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var r result
	var errs []error
	for range servers {
		// One app server: its own Redis connections and dlock Client, shared by its requests.
		rdb := srv.NewClient()
		client := dlock.New(rdb)
		var sg sync.WaitGroup
		for range requests {
			sg.Go(func() {
				<-start
				began := time.Now()
				hit, err := getProduct(ctx, rdb, client, db, withLock)
				took := time.Since(began)
				mu.Lock()
				defer mu.Unlock()
				if err != nil {
					errs = append(errs, err)
				}
				if hit {
					r.hits++
				}
				r.slowest = max(r.slowest, took)
			})
		}
		wg.Go(func() {
			sg.Wait()
			client.Close()
			rdb.Close()
		})
	}
	close(start)
	wg.Wait()
	r.queries = db.queries.Load()
	return r, errors.Join(errs...)
}

// getProduct is a request: it reads the product from the cache and, on a miss, rebuilds
// the entry from the database. It reports whether the cache had it.
func getProduct(ctx context.Context, rdb *redis.Client, client *dlock.Client, db *database, withLock bool) (bool, error) {
	if _, err := rdb.Get(ctx, productKey).Result(); err == nil {
		return true, nil
	} else if !errors.Is(err, redis.Nil) {
		return false, err
	}
	if !withLock {
		return false, rebuild(ctx, rdb, db)
	}

	lease, err := client.Mutex(productKey).Lock(ctx) // one rebuild at a time, across all servers
	if err != nil {
		return false, err
	}
	defer lease.Unlock(context.WithoutCancel(ctx))
	// Whoever held the lock before us has probably rebuilt the entry: look again.
	if _, err := rdb.Get(lease.Context(), productKey).Result(); err == nil {
		return true, nil
	} else if !errors.Is(err, redis.Nil) {
		return false, err
	}
	return false, rebuild(lease.Context(), rdb, db)
}

// rebuild queries the database and fills the cache.
func rebuild(ctx context.Context, rdb *redis.Client, db *database) error {
	v, err := db.loadProduct(ctx)
	if err != nil {
		return err
	}
	if err := rdb.Set(ctx, productKey, v, cacheTTL).Err(); err != nil {
		return fmt.Errorf("fill the cache: %w", err)
	}
	return nil
}
