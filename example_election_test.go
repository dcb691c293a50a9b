package dlock_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

func ExampleElection() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	alice, bob := dlock.New(rdb), dlock.New(rdb) // two processes, say
	defer alice.Close()
	defer bob.Close()
	ctx := context.Background()

	term, err := alice.Election("example:scheduler").Campaign(ctx, "alice")
	if err != nil {
		fmt.Println("campaign:", err)
		return
	}
	fmt.Println("alice leads, term", term.Token())
	_, err = bob.Election("example:scheduler").TryCampaign(ctx, "bob")
	fmt.Println("bob leads too:", err == nil, "| led by someone else:", errors.Is(err, dlock.ErrNotAcquired))
	_ = term.Unlock(ctx) // resign
	term, _ = bob.Election("example:scheduler").TryCampaign(ctx, "bob")
	fmt.Println("after alice resigned, bob leads, term", term.Token())
	_ = term.Unlock(ctx)
	// Output:
	// alice leads, term 1
	// bob leads too: false | led by someone else: true
	// after alice resigned, bob leads, term 2
}

func ExampleLeader() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	primary := dlock.New(rdb, dlock.WithOwner("db-1"))
	defer primary.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	election := client.Election("example:primary")
	_, err := election.Leader(ctx)
	fmt.Println("no primary yet:", errors.Is(err, dlock.ErrNoLeader))
	term, _ := primary.Election("example:primary").Campaign(ctx, "10.0.0.1:5432")
	leader, err := election.Leader(ctx)
	if err != nil {
		fmt.Println("leader:", err)
		return
	}
	fmt.Printf("connect to %s (owner %s, term %d)\n", leader.Value, leader.Owner, leader.Token)
	_ = term.Unlock(ctx)
	// Output:
	// no primary yet: true
	// connect to 10.0.0.1:5432 (owner db-1, term 1)
}

func ExampleTerm_Proclaim() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	election := client.Election("example:config")
	term, _ := election.Campaign(ctx, "v1")
	if err := term.Proclaim(ctx, "v2"); err != nil {
		fmt.Println("proclaim:", err)
	}
	leader, _ := election.Leader(ctx)
	fmt.Println("the term's value:", term.Value(), "| read by others:", leader.Value)
	_ = term.Unlock(ctx)
	err := term.Proclaim(ctx, "v3")
	fmt.Println("after resigning:", errors.Is(err, dlock.ErrNotHeld))
	// Output:
	// the term's value: v2 | read by others: v2
	// after resigning: true
}

func ExampleElection_Observe() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel() // closes the channel

	election := client.Election("example:observed")
	leaders := election.Observe(ctx)
	show := func(l dlock.Leader) {
		if errors.Is(l.Err, dlock.ErrNoLeader) {
			fmt.Println("no leader")
			return
		}
		fmt.Println("leader:", l.Value)
	}
	show(<-leaders)
	term, _ := election.Campaign(ctx, "worker-1")
	show(<-leaders)
	_ = term.Unlock(ctx)
	show(<-leaders)
	// Output:
	// no leader
	// leader: worker-1
	// no leader
}

func ExampleElection_Run() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	// Run leads, loses and leads again until fn returns while leading (or ctx ends).
	err := client.Election("example:singleton").Run(ctx, "worker-1", func(ctx context.Context) error {
		lease, _ := dlock.LeaseFrom(ctx) // the term, for its fencing token
		fmt.Println("the only worker running, term", lease.Token())
		return nil // done: Run resigns and returns
	})
	fmt.Println("run:", err)
	// Output:
	// the only worker running, term 1
	// run: <nil>
}
