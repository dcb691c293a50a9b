package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/faultproxy"
)

// The Client's life: construction from bad input, and Close under way while a Lock is on
// the wire.

// Close while an acquisition is on the wire: Lock fails with ErrClosed and nothing stays held.
func TestCloseDuringLockLeavesNothing(t *testing.T) {
	srv, rdb := standalone(t)
	p := faultproxy.New(t, srv.Addr)
	p.SetLatency(t, 100*time.Millisecond)
	via := redis.NewClient(&redis.Options{Addr: p.Addr})
	t.Cleanup(func() { _ = via.Close() })
	via.Ping(context.Background())
	c := dlock.New(via)
	res := make(chan error, 1)
	go func() {
		l, err := c.Mutex("leak").Lock(context.Background())
		if err == nil && l.Err() == nil {
			err = errors.New("Lock returned a live lease across Close")
		}
		res <- err
	}()
	time.Sleep(30 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-res; err != nil && !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Lock across Close: %v", err)
	}
	waitFor(t, 5*time.Second, "the key to be released", func() bool {
		return rdb.Exists(context.Background(), "dlock:leak").Val() == 0
	})
}

func TestTypedNilClient(t *testing.T) {
	var rdb *redis.Client
	if _, err := dlock.New(rdb).Mutex("x").TryLock(context.Background()); err == nil {
		t.Fatal("a typed-nil client gave no error")
	}
	if _, err := dlock.NewQuorum([]redis.UniversalClient{rdb}); err == nil {
		t.Fatal("NewQuorum with a typed-nil node gave no error")
	}
}
