package dlock_test

import (
	"context"
	"fmt"
	"sync/atomic"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

func ExampleObserver() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	// Counters an Observer keeps; it is called from many goroutines, and must not block.
	var acquired, refused, released atomic.Int64
	client := dlock.New(rdb, dlock.WithObserver(dlock.Observer{
		WaitEnded: func(e dlock.WaitEnd) {
			if e.Err == nil {
				acquired.Add(1)
			}
		},
		Attempted: func(a dlock.Attempt) {
			if a.Verdict == dlock.VerdictHeld {
				refused.Add(1)
			}
		},
		HoldEnded: func(e dlock.HoldEnd) {
			if e.Cause == dlock.NotLost {
				released.Add(1)
			}
		},
	}))
	defer client.Close()
	other := dlock.New(rdb) // another process, say
	defer other.Close()
	ctx := context.Background()

	for range 3 {
		lease, err := client.Mutex("example:observed").Lock(ctx)
		if err != nil {
			fmt.Println("lock:", err)
			return
		}
		_ = lease.Unlock(ctx)
	}
	held, _ := other.Mutex("example:observed").Lock(ctx)
	_, err := client.Mutex("example:observed").TryLock(ctx)
	fmt.Println("TryLock:", err != nil)
	_ = held.Unlock(ctx)
	fmt.Println("acquired", acquired.Load(), "refused", refused.Load(), "released", released.Load())
	// Output:
	// TryLock: true
	// acquired 3 refused 1 released 3
}
