package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

func Example() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr}) // your Redis, e.g. "localhost:6379"
	defer rdb.Close()
	client := dlock.New(rdb) // one per process
	defer client.Close()
	ctx := context.Background()

	lease, err := client.Mutex("example:report").Lock(ctx)
	if err != nil {
		fmt.Println("lock:", err)
		return
	}
	fmt.Println("holding", lease.Name(), "with fencing token", lease.Token())
	if err := lease.Unlock(ctx); err != nil {
		fmt.Println("unlock:", err)
	}
	fmt.Println("after Unlock:", lease.Err())
	// Output:
	// holding example:report with fencing token 1
	// after Unlock: dlock: lease released
}

func ExampleMutex_TryLock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	alice, bob := dlock.New(rdb), dlock.New(rdb) // two processes, say
	defer alice.Close()
	defer bob.Close()
	ctx := context.Background()

	lease, _ := alice.Mutex("example:cron").TryLock(ctx)
	_, err := bob.Mutex("example:cron").TryLock(ctx)
	fmt.Println("bob got it:", err == nil, "| held by someone else:", errors.Is(err, dlock.ErrNotAcquired))
	_ = lease.Unlock(ctx)
	lease, err = bob.Mutex("example:cron").TryLock(ctx)
	fmt.Println("after alice's Unlock, bob got it:", err == nil, "with token", lease.Token())
	_ = lease.Unlock(ctx)
	// Output:
	// bob got it: false | held by someone else: true
	// after alice's Unlock, bob got it: true with token 2
}

func ExampleMutex_Do() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	err := client.Mutex("example:cache:user:42").Do(ctx, func(ctx context.Context) error {
		// Rebuild the cache entry; ctx is cancelled if the lease is lost.
		fmt.Println("rebuilding the cache entry")
		return nil
	})
	fmt.Println("done:", err)
	// Output:
	// rebuilding the cache entry
	// done: <nil>
}

func ExampleLease() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	// A lease that is not renewed ends at its deadline: Done closes, Context is cancelled
	// and Err says it was lost. Work under the lock watches for that.
	lease, err := client.Mutex("example:short", dlock.TTL(100*time.Millisecond), dlock.NoRenew()).Lock(ctx)
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println("held:", lease.Err() == nil, "| valid for at most 100ms:", time.Until(lease.ValidUntil()) <= 100*time.Millisecond)
	select {
	case <-lease.Context().Done():
		fmt.Println("lost:", lease.Err(), "| cause:", context.Cause(lease.Context()))
	case <-time.After(5 * time.Second):
		fmt.Println("still held")
	}
	err = lease.Unlock(ctx)
	fmt.Println("unlock after loss is ErrNotHeld:", errors.Is(err, dlock.ErrNotHeld))
	// Output:
	// held: true | valid for at most 100ms: true
	// lost: dlock: lease lost | cause: dlock: lease lost
	// unlock after loss is ErrNotHeld: true
}

func ExampleLease_Context() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()
	mutex := client.Mutex("example:reentrant")

	outer, _ := mutex.Lock(ctx)
	// Re-entry is by context: a Lock with the lease's context joins the hold at once.
	inner, _ := mutex.Lock(outer.Context())
	fmt.Println("same token:", inner.Token() == outer.Token())
	_ = inner.Unlock(ctx) // ends only the inner lease
	fmt.Println("outer still held:", outer.Err() == nil)
	_ = outer.Unlock(ctx) // releases the lock
	fmt.Println("outer:", outer.Err())
	// Output:
	// same token: true
	// outer still held: true
	// outer: dlock: lease released
}

func ExampleLease_Extend() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	lease, _ := client.Mutex("example:batch", dlock.TTL(time.Second), dlock.NoRenew()).Lock(ctx)
	if err := lease.Extend(ctx, time.Minute); err != nil {
		fmt.Println(err)
	}
	fmt.Println("valid for more than 50s:", time.Until(lease.ValidUntil()) > 50*time.Second)
	_ = lease.Unlock(ctx)
	// Output:
	// valid for more than 50s: true
}

func ExampleClient_Close() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	ctx := context.Background()

	lease, _ := client.Mutex("example:shutdown").Lock(ctx)
	_ = client.Close() // releases every lease the client still holds
	fmt.Println("lease:", lease.Err())
	_, err := client.Mutex("example:shutdown").Lock(ctx)
	fmt.Println("closed client:", errors.Is(err, dlock.ErrClosed))
	// Output:
	// lease: dlock: lease released
	// closed client: true
}

func ExampleFairMutex() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	ctx := context.Background()
	holder := dlock.New(rdb)
	defer holder.Close()

	lease, _ := holder.FairMutex("example:fair").Lock(ctx)
	done := make(chan string, 3)
	for _, name := range []string{"first", "second", "third"} {
		waiter := dlock.New(rdb) // separate processes, say
		defer waiter.Close()
		go func() {
			l, err := waiter.FairMutex("example:fair").Lock(ctx)
			if err != nil {
				done <- err.Error()
				return
			}
			done <- name
			_ = l.Unlock(ctx) // hands the lock straight to the next in line
		}()
		time.Sleep(50 * time.Millisecond) // they ask in this order
	}
	_ = lease.Unlock(ctx)
	fmt.Println(<-done, <-done, <-done)
	// Output:
	// first second third
}

func ExampleRWMutex() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()
	doc := client.RWMutex("example:doc")

	r1, _ := doc.RLock(ctx)
	r2, _ := doc.RLock(ctx) // readers share
	_, err := doc.TryLock(ctx)
	fmt.Println("writer while two read:", errors.Is(err, dlock.ErrNotAcquired))
	_ = r1.Unlock(ctx)
	_ = r2.Unlock(ctx)

	w, _ := doc.Lock(ctx)
	_, err = doc.Lock(w.Context()) // re-entry
	fmt.Println("writer re-enters:", err == nil)
	r, err := doc.RLock(w.Context()) // downgrade: a writer may also read
	fmt.Println("downgrade:", err == nil)
	_ = w.Unlock(ctx)
	_, err = doc.Lock(r.Context()) // upgrade would deadlock two readers: refused
	fmt.Println("upgrade refused:", err != nil)
	_ = r.Unlock(ctx)
	// Output:
	// writer while two read: true
	// writer re-enters: true
	// downgrade: true
	// upgrade refused: true
}

func ExampleSemaphore() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()
	pool := client.Semaphore("example:connections", 3) // at most 3 permits out at once

	a, _ := pool.Acquire(ctx, 2)
	b, _ := pool.Acquire(ctx, 1)
	_, err := pool.TryAcquire(ctx, 1)
	fmt.Println("a fourth permit:", errors.Is(err, dlock.ErrNotAcquired))
	_ = a.Unlock(ctx) // gives back both permits
	c, err := pool.TryAcquire(ctx, 2)
	fmt.Println("after a's Unlock:", err == nil)
	_ = b.Unlock(ctx)
	_ = c.Unlock(ctx)
	// Output:
	// a fourth permit: true
	// after a's Unlock: true
}

func ExampleQuorumError() {
	// A quorum of three nodes, two of which are down (nothing listens on ports 1 and 2).
	var nodes []redis.UniversalClient
	for _, addr := range []string{redisAddr, "127.0.0.1:1", "127.0.0.1:2"} {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		defer rdb.Close()
		nodes = append(nodes, rdb)
	}
	client, err := dlock.NewQuorum(nodes)
	if err != nil {
		fmt.Println(err)
		return
	}
	defer client.Close()

	_, err = client.Mutex("example:quorum").TryLock(context.Background())
	var qe *dlock.QuorumError
	if errors.As(err, &qe) {
		fmt.Printf("%s: %d of %d nodes agreed, %d needed\n", qe.Op, qe.Agreed, qe.Total, qe.Needed)
		for _, ne := range qe.Nodes {
			fmt.Println("failed:", ne.Addr)
		}
	}
	var ne *dlock.NodeError // the first node error, wherever it is in the chain
	fmt.Println("a node error:", errors.As(err, &ne))
	// Output:
	// lock: 1 of 3 nodes agreed, 2 needed
	// failed: 127.0.0.1:1
	// failed: 127.0.0.1:2
	// a node error: true
}
