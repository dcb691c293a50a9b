package embedredis

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestExpiresInStepWithTheClock: a key with a TTL is there until its TTL has passed on the
// wall clock, and gone after, with nothing but time passing in between.
func TestExpiresInStepWithTheClock(t *testing.T) {
	mr, err := Start()
	if err != nil {
		t.Fatal(err)
	}
	defer mr.Close()
	rdb := redis.NewClient(&redis.Options{Addr: mr.Addr()})
	defer rdb.Close()
	ctx := context.Background()

	const ttl = 200 * time.Millisecond
	sent := time.Now()
	if err := rdb.Set(ctx, "k", "v", ttl).Err(); err != nil {
		t.Fatal(err)
	}
	set := time.Now() // the TTL started between sent and set
	n, err := rdb.Exists(ctx, "k").Result()
	if err != nil || n != 1 && time.Since(sent) < ttl {
		t.Fatalf("EXISTS before the TTL = %d, %v; want 1", n, err)
	}
	time.Sleep(time.Until(set.Add(ttl + 5*time.Millisecond)))
	if n, err := rdb.Exists(ctx, "k").Result(); err != nil || n != 0 {
		t.Fatalf("EXISTS after the TTL = %d, %v; want 0", n, err)
	}
}
