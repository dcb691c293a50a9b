package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

func ExampleClient_Inspect() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	sem := client.Semaphore("example:inspect", 3, dlock.TTL(time.Minute))
	lease, _ := sem.Acquire(ctx, 2)
	defer lease.Unlock(ctx)

	info, err := client.Inspect(ctx, "example:inspect")
	if err != nil {
		fmt.Println("inspect:", err)
		return
	}
	h := info.Holders[0]
	fmt.Println(info.Kind, "held:", info.Held(), "| fencing token:", info.Fence == lease.Token())
	fmt.Println("holder's permits:", h.Permits, "| time left under a minute:", h.TTL > 0 && h.TTL <= time.Minute)
	// Output:
	// semaphore held: true | fencing token: true
	// holder's permits: 2 | time left under a minute: true
}

func ExampleClient_ForceUnlock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	stuck, operator := dlock.New(rdb), dlock.New(rdb) // two processes, say
	defer stuck.Close()
	defer operator.Close()
	ctx := context.Background()

	lease, _ := stuck.Mutex("example:stuck", dlock.TTL(300*time.Millisecond)).Lock(ctx)
	removed, err := operator.ForceUnlock(ctx, "example:stuck")
	if err != nil {
		fmt.Println("force-unlock:", err)
		return
	}
	fmt.Println("removed a", removed.Kind, "with", len(removed.Holders), "holder")
	<-lease.Done() // at its next renewal, the holder finds its key gone
	fmt.Println("holder's lease:", lease.Err())

	again, _ := operator.Mutex("example:stuck").TryLock(ctx)
	fmt.Println("next token is larger:", again.Token() > lease.Token())
	_ = again.Unlock(ctx)
	// Output:
	// removed a mutex with 1 holder
	// holder's lease: dlock: lease lost
	// next token is larger: true
}

func ExampleLockInfo() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	info, _ := client.Inspect(ctx, "example:free")
	fmt.Printf("kind %q, held %v, %d node(s)\n", info.Kind, info.Held(), len(info.Nodes))

	rdb.HSet(ctx, "dlock:example:foreign", "field", "value") // another program's key
	defer rdb.Del(ctx, "dlock:example:foreign")
	_, err := client.Inspect(ctx, "example:foreign")
	var ne *dlock.NodeError
	fmt.Println("not a lock:", errors.Is(err, dlock.ErrNotLock), "| node named:", errors.As(err, &ne) && ne.Addr == redisAddr)
	// Output:
	// kind "", held false, 1 node(s)
	// not a lock: true | node named: true
}
