package dlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

func ExampleLeaseFrom() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	err := client.Mutex("example:ledger").Do(ctx, func(ctx context.Context) error {
		// Inside Do only ctx is at hand: it carries the lease, and so the fencing token
		// that the storage written to should check.
		lease, ok := dlock.LeaseFrom(ctx)
		if !ok {
			return errors.New("no lease")
		}
		fmt.Println("writing with fencing token", lease.Token())
		return nil
	})
	fmt.Println("done:", err)
	_, ok := dlock.LeaseFrom(ctx)
	fmt.Println("a ctx without a lease:", ok)
	// Output:
	// writing with fencing token 1
	// done: <nil>
	// a ctx without a lease: false
}

func ExampleRWMutex_Do() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	config := client.RWMutex("example:config")
	err := config.Do(ctx, func(ctx context.Context) error {
		// No reader and no other writer while this runs.
		fmt.Println("rewriting the configuration")
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// rewriting the configuration
	// done: <nil>
}

func ExampleRWMutex_RDo() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	alice, bob := dlock.New(rdb), dlock.New(rdb) // two processes, say
	defer alice.Close()
	defer bob.Close()
	ctx := context.Background()

	err := alice.RWMutex("example:settings").RDo(ctx, func(ctx context.Context) error {
		// While alice reads, bob reads too.
		return bob.RWMutex("example:settings").RDo(ctx, func(ctx context.Context) error {
			info, err := bob.Inspect(ctx, "example:settings")
			if err != nil {
				return err
			}
			fmt.Println("readers at once:", len(info.Holders))
			return nil
		})
	})
	fmt.Println("done:", err)
	// Output:
	// readers at once: 2
	// done: <nil>
}

func ExampleSemaphore_Do() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	gpus := client.Semaphore("example:gpus", 4)
	err := gpus.Do(ctx, 3, func(ctx context.Context) error {
		lease, _ := dlock.LeaseFrom(ctx)
		_, err := gpus.TryAcquire(ctx, 2)
		fmt.Println("holding 3 of 4:", lease.Err() == nil, "| 2 more free:", err == nil)
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// holding 3 of 4: true | 2 more free: false
	// done: <nil>
}
