package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// New keeps its one-result signature, so an invalid option cannot fail it: New logs the
// option's error once, through the Client's logger, and every call of the Client returns
// it.
func ExampleNew() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	log := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			if a.Key == slog.TimeKey {
				return slog.Attr{} // a stable output for this example
			}
			return a
		},
	}))
	client := dlock.New(rdb, dlock.WithLogger(log), dlock.WithDriftFactor(2))
	defer client.Close()

	_, err := client.Mutex("example:options").TryLock(context.Background())
	fmt.Println("TryLock:", err)
	// Output:
	// level=ERROR msg="dlock: New: every operation of this Client will fail" err="dlock: drift factor 2 is out of range: use a value in [0, 0.5), such as the default 0.01"
	// TryLock: dlock: drift factor 2 is out of range: use a value in [0, 0.5), such as the default 0.01
}

// An error says "dlock: " once, then what failed and why; errors.Is finds each cause.
func ExampleLease_Unlock() {
	rdb := redis.NewClient(&redis.Options{Addr: redisAddr})
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	ctx := context.Background()

	lease, _ := client.Mutex("example:twice").Lock(ctx)
	fmt.Println("first Unlock:", lease.Unlock(ctx))
	err := lease.Unlock(ctx)
	fmt.Println("second Unlock:", err)
	fmt.Println("not held:", errors.Is(err, dlock.ErrNotHeld), "| released:", errors.Is(err, dlock.ErrReleased))
	// Output:
	// first Unlock: <nil>
	// second Unlock: dlock: unlock "example:twice": lease not held: lease released (unlocked)
	// not held: true | released: true
}
