package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

func ExampleTimestampMutex() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	// Bare keys: the system's other services lock "example:import" with SETNX and GETSET.
	client := dlock.New(rdb, dlock.WithPrefix(""))
	defer client.Close()
	ctx := context.Background()
	m := client.TimestampMutex("example:import")

	lease, err := m.Lock(ctx)
	if err != nil {
		fmt.Println("lock:", err)
		return
	}
	deadline, _ := rdb.Get(ctx, "example:import").Int64()
	ahead := time.Until(time.UnixMilli(deadline))
	fmt.Println("the key holds a deadline at most the TTL ahead:", ahead > 0 && ahead <= dlock.DefaultTTL)
	// What another service does: SETNX with its own deadline, refused while dlock holds.
	taken, _ := rdb.SetNX(ctx, "example:import", time.Now().Add(time.Minute).UnixMilli(), 0).Result()
	fmt.Println("another service's SETNX:", taken)
	_ = lease.Unlock(ctx)

	// A key that holds no deadline is an error, which quotes what it holds.
	rdb.Set(ctx, "example:import", "busy", 0)
	_, err = m.TryLock(ctx)
	fmt.Println("not a deadline:", errors.Is(err, dlock.ErrNotTimestamp))
	rdb.Del(ctx, "example:import")
	// Output:
	// the key holds a deadline at most the TTL ahead: true
	// another service's SETNX: false
	// not a deadline: true
}
