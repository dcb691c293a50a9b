package dlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestWakeOnShortenedExpiry: where keyspace events are on (Kgx), a MultiMutex waiter, which
// neither tracks its keys nor refreshes a wait entry, hears another program that ends a
// hold by shortening the key's expiry (redis-cli PEXPIRE key 1, an overwrite with a short
// or past expiry). Redis publishes only "expire" for it ("set" is class $, not in Kgx);
// the key's "expired" comes only when Redis removes it, on access or when the active
// expiry cycle, which looks at about 20 volatile keys per 100ms, finds it: in a database
// of many volatile keys (dlock's own tombstones are volatile), minutes later. The waiter
// must not sleep until the first holder's 30s would have run out.
func TestWakeOnShortenedExpiry(t *testing.T) {
	t.Parallel()
	shorten := []struct {
		name string
		do   func(ctx context.Context, rdb *redis.Client, key string) error
	}{
		{"PEXPIRE 1", func(ctx context.Context, rdb *redis.Client, key string) error {
			return rdb.PExpire(ctx, key, time.Millisecond).Err()
		}},
		{"SET PX 1", func(ctx context.Context, rdb *redis.Client, key string) error {
			return rdb.Set(ctx, key, "second", time.Millisecond).Err()
		}},
		{"SET PXAT past", func(ctx context.Context, rdb *redis.Client, key string) error {
			return rdb.Do(ctx, "SET", key, "second", "PXAT", 1000).Err()
		}},
		{"GETEX PX 1", func(ctx context.Context, rdb *redis.Client, key string) error {
			return rdb.GetEx(ctx, key, time.Millisecond).Err()
		}},
	}
	for _, s := range shorten {
		t.Run(s.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.WithArgs("--notify-keyspace-events", "Kgx"))
			rdb := srv.Client(t)
			ctx := ctxTimeout(t, 20*time.Second)
			// Many volatile keys, as in a busy database: the active expiry cycle then takes
			// minutes to reach any one key.
			const fill = `for i = ARGV[1], ARGV[1] + 24999 do redis.call('SET', 'cache:' .. i, 'x', 'PX', 3600000) end return 1`
			for i := 0; i < 150000; i += 25000 {
				if err := rdb.Eval(ctx, fill, nil, i).Err(); err != nil {
					t.Fatal(err)
				}
			}
			c := newClient(t, rdb, dlock.WithPrefix(""))
			const key = "shortened"
			foreignHold(t, ctx, []redis.Cmdable{rdb}, key, "first", longTTL)
			got := acquiredAt(t, ctx, c.MultiMutex([]string{key}, dlock.TTL(longTTL)).Lock)
			time.Sleep(300 * time.Millisecond) // let the waiter listen and settle
			freed := time.Now()
			if err := s.do(ctx, rdb, key); err != nil {
				t.Fatal(err)
			}
			select {
			case at := <-got:
				if at.IsZero() {
					t.FailNow()
				}
				t.Logf("the waiter acquired %v after %s", at.Sub(freed), s.name)
			case <-time.After(3 * time.Second):
				t.Fatalf("the key was free 1ms after %s (Redis published only \"expire\"), and the waiter still slept 3s later: it wakes at the first holder's %v", s.name, longTTL)
			}
		})
	}
}
