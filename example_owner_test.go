package dlock_test

import (
	"context"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

func ExampleWithOwner() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	// The default is "host:pid"; a service instance's name says more on call.
	worker := dlock.New(rdb, dlock.WithOwner("report-worker-2"))
	defer worker.Close()
	operator := dlock.New(rdb) // another process, say dlock status
	defer operator.Close()
	ctx := context.Background()

	lease, err := worker.Mutex("example:nightly-report").Lock(ctx)
	if err != nil {
		fmt.Println("lock:", err)
		return
	}
	defer lease.Unlock(ctx)

	info, err := operator.Inspect(ctx, "example:nightly-report")
	if err != nil {
		fmt.Println("inspect:", err)
		return
	}
	fmt.Println("held by", info.Holders[0].Owner)
	// Output:
	// held by report-worker-2
}
