package dlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// The Client's life: construction from bad input, and Close under way while a Lock is on
// the wire.

// Close while an acquisition is on the wire: Lock fails with ErrClosed and nothing stays held.
func TestCloseDuringLockLeavesNothing(t *testing.T) {
	srv, rdb := standalone(t)
	p, via := behindProxy(t, srv, redis.Options{})
	p.SetLatency(t, 100*time.Millisecond)
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

// TestRingRefused: a *redis.Ring's shards are independent servers that go-redis picks by a
// command's first key or channel, which a waiter's subscription and a MultiMutex's script
// cannot follow, so a Client of one returns an error that says what to use instead, from
// every operation, and writes nothing.
func TestRingRefused(t *testing.T) {
	t.Parallel()
	a, b := redistest.Start(t), redistest.Start(t)
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": a.Addr, "b": b.Addr}})
	t.Cleanup(func() { _ = ring.Close() })
	ctx := ctxTimeout(t, 10*time.Second)
	c := dlock.New(ring)
	defer c.Close()
	for op, call := range map[string]func() error{
		"Mutex.Lock":      func() error { _, err := c.Mutex("x").Lock(ctx); return err },
		"MultiMutex.Lock": func() error { _, err := c.MultiMutex([]string{"x", "y"}).Lock(ctx); return err },
		"Semaphore.TryAcquire": func() error {
			_, err := c.Semaphore("s", 2).TryAcquire(ctx, 1)
			return err
		},
	} {
		if err := call(); err == nil || !strings.Contains(err.Error(), "*redis.Ring is not supported") {
			t.Errorf("%s on a Ring = %v, want the error that a Ring is not supported", op, err)
		}
	}
	if _, err := dlock.NewQuorum([]redis.UniversalClient{a.Client(t), ring, b.Client(t)}); err == nil || !strings.Contains(err.Error(), "*redis.Ring is not supported") {
		t.Errorf("NewQuorum with a Ring = %v, want the error that a Ring is not supported", err)
	}
	for _, srv := range []*redistest.Server{a, b} {
		if keys := srv.Client(t).Keys(ctx, "*").Val(); len(keys) != 0 {
			t.Errorf("a refused Client wrote %v on %s", keys, srv.Addr)
		}
	}
}

// TestCloseReleasesEveryName: Close releases what the process holds under every name and
// ends the Locks and Unlocks racing it on every other, however many names there are: no
// lock key stays in Redis and every lease reports ErrReleased.
func TestCloseReleasesEveryName(t *testing.T) {
	srv, rdb := standalone(t)
	p, via := behindProxy(t, srv, redis.Options{})
	ctx := ctxTimeout(t, 30*time.Second)
	c := dlock.New(via)
	held := make([]*dlock.Lease, 300)
	for i := range held {
		held[i] = mustLock(t, c.Mutex("held-"+strconv.Itoa(i)), ctx)
	}
	// Round trips as long as Close's own: acquisitions land while it releases.
	p.SetLatency(t, 20*time.Millisecond)
	racing := make(chan error, 64)
	for g := range cap(racing) {
		go func() {
			m := c.Mutex("racing-" + strconv.Itoa(g))
			for {
				l, err := m.Lock(ctx)
				if err == nil {
					err = l.Unlock(ctx)
				}
				if err != nil {
					racing <- err
					return
				}
			}
		}()
	}
	time.Sleep(200 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	for range cap(racing) {
		if err := <-racing; !errors.Is(err, dlock.ErrClosed) {
			t.Errorf("a Lock or Unlock racing Close = %v, want ErrClosed", err)
		}
	}
	for i, l := range held {
		if l.Err() != dlock.ErrReleased {
			t.Fatalf("lease %d after Close: %v, want ErrReleased", i, l.Err())
		}
	}
	if keys := rdb.Keys(ctx, "dlock:*").Val(); len(keys) != 0 {
		t.Fatalf("%d lock keys left after Close, such as %q", len(keys), keys[0])
	}
}
