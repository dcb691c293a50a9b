package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// A Client with WithReplicaAcks grants a lock only once a replica has it. The server of
// this example has no replica, so nothing is acknowledged: the acquisition is undone and
// refused.
func ExampleWithReplicaAcks() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr}) // your master, or a Sentinel failover client
	defer rdb.Close()
	client := dlock.New(rdb, dlock.WithReplicaAcks(1, 50*time.Millisecond))
	defer client.Close()

	_, err := client.Mutex("example:replicated").TryLock(context.Background())
	fmt.Println("not replicated:", errors.Is(err, dlock.ErrNotReplicated))
	// Output:
	// not replicated: true
}
