package dlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

func ExampleMultiMutex() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	// A transfer between two accounts locks both, all or none; the order does not matter.
	lease, err := client.MultiMutex([]string{"example:account:bob", "example:account:alice"}).Lock(ctx)
	if err != nil {
		fmt.Println("lock:", err)
		return
	}
	fmt.Println("holding", lease.Name(), "with tokens", lease.Tokens())
	// Each name is also a Mutex's: a Mutex of one of them waits for the transfer.
	_, err = client.Mutex("example:account:alice").TryLock(ctx)
	fmt.Println("alice alone while the transfer runs:", errors.Is(err, dlock.ErrNotAcquired))
	_ = lease.Unlock(ctx)
	// Output:
	// holding example:account:bob,example:account:alice with tokens map[example:account:alice:1 example:account:bob:1]
	// alice alone while the transfer runs: true
}

func ExampleMultiMutex_TryLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	alice, bob := dlock.New(rdb), dlock.New(rdb) // two processes, say
	defer alice.Close()
	defer bob.Close()
	ctx := context.Background()

	lease, _ := alice.Mutex("example:warehouse:north").Lock(ctx)
	// Bob's move needs both warehouses; one is held, so he gets neither.
	_, err := bob.MultiMutex([]string{"example:warehouse:north", "example:warehouse:south"}).TryLock(ctx)
	fmt.Println("held by someone else:", errors.Is(err, dlock.ErrNotAcquired))
	south, err := alice.Mutex("example:warehouse:south").TryLock(ctx)
	fmt.Println("south still free:", err == nil)
	_ = south.Unlock(ctx)
	_ = lease.Unlock(ctx)
	// Output:
	// held by someone else: true
	// south still free: true
}

func ExampleMultiMutex_Do() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	err := client.MultiMutex([]string{"example:sku:1", "example:sku:2"}).Do(ctx, func(ctx context.Context) error {
		// Move stock between the two; ctx is cancelled if the lease is lost.
		fmt.Println("moving stock")
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// moving stock
	// done: <nil>
}
