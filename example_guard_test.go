package dlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

func ExampleLease_Guard() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	// The lock's name carries a hash tag, {sale}, and so do the keys it guards: on a
	// Cluster they share its slot, as Guard requires.
	rdb.Set(ctx, "{sale}:stock", 10, 0)
	lease, err := client.Mutex("example:{sale}").Lock(ctx)
	if err != nil {
		fmt.Println("lock:", err)
		return
	}
	sell := func(ctx context.Context) error {
		_, err := lease.Guard(ctx, func(pipe redis.Pipeliner) error {
			pipe.Decr(ctx, "{sale}:stock")
			pipe.RPush(ctx, "{sale}:orders", "order-1")
			return nil
		})
		return err
	}
	fmt.Println("sold while held:", sell(ctx))

	// Once the lock is no longer the lease's (here, removed by an operator; or expired
	// while its holder was paused), Redis applies none of the writes.
	_, _ = client.ForceUnlock(ctx, "example:{sale}")
	err = sell(ctx)
	fmt.Println("refused:", errors.Is(err, dlock.ErrNotHeld), errors.Is(err, dlock.ErrLost))
	fmt.Println("stock:", rdb.Get(ctx, "{sale}:stock").Val())
	rdb.Del(ctx, "{sale}:stock", "{sale}:orders")
	// Output:
	// sold while held: <nil>
	// refused: true true
	// stock: 9
}

func ExampleLease_Key() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	lease, err := client.Mutex("example:nightly").Lock(ctx)
	if err != nil {
		fmt.Println("lock:", err)
		return
	}
	defer lease.Unlock(ctx)
	// A key in the lock's Redis Cluster slot, for the writes Guard sends.
	fmt.Println(lease.Key("done"))
	// Output: {dlock:example:nightly}/done
}
