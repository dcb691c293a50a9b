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

// Regression tests for failures found in review. Each reproduces the interleaving with real
// servers, a TCP proxy for latency, or a key changed under the lock.

// An Extend to a shorter TTL that times out here but lands on the server must not leave
// the lease believing in its old, longer deadline.
func TestFailedShorterExtendShortensDeadline(t *testing.T) {
	srv, rdb := standalone(t)
	p := faultproxy.New(t, srv.Addr)
	via := redis.NewClient(&redis.Options{Addr: p.Addr})
	t.Cleanup(func() { _ = via.Close() })
	c := newClient(t, via)
	ctx := ctxTimeout(t, 10*time.Second)
	l := mustLock(t, c.Mutex("ext"), ctx) // TTL 30s
	p.SetLatency(t, 100*time.Millisecond)
	ectx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if err := l.Extend(ectx, 200*time.Millisecond); err == nil {
		t.Fatal("Extend through 100ms of latency with a 30ms ctx succeeded")
	}
	time.Sleep(500 * time.Millisecond)
	if l2, err := newClient(t, rdb).Mutex("ext").TryLock(ctx); err == nil {
		if l.Err() == nil && time.Now().Before(l.ValidUntil()) {
			t.Fatalf("two live leases: the first valid for %v more, the second has token %d", time.Until(l.ValidUntil()), l2.Token())
		}
	}
}

// A holder with a majority but not every node: a waiter that the free node grants must
// wait like any other, not spin on split votes for the whole hold.
func TestQuorumWaiterDoesNotSpinOnMinorityGrant(t *testing.T) {
	servers, nodes, c := quorumOf(t, 3)
	ctx := ctxTimeout(t, 20*time.Second)
	l := mustLock(t, c.Mutex("hot"), ctx)
	defer l.Unlock(ctx)
	waitFor(t, 2*time.Second, "the key on node 2", func() bool { return nodes[2].Exists(ctx, "dlock:hot").Val() == 1 })
	nodes[2].Del(ctx, "dlock:hot") // node 2 restarted empty, or missed the SET
	// The waiter reaches nodes 0 and 1 through 3ms of latency, node 2 directly.
	var via []redis.UniversalClient
	for i, s := range servers {
		if i == 2 {
			via = append(via, s.Client(t))
			continue
		}
		p := faultproxy.New(t, s.Addr)
		p.SetLatency(t, 3*time.Millisecond)
		rdb := redis.NewClient(&redis.Options{Addr: p.Addr})
		t.Cleanup(func() { _ = rdb.Close() })
		via = append(via, rdb)
	}
	waiter := newQuorumClient(t, via)
	before := scriptCalls(t, nodes[2].(*redis.Client))
	wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	if _, err := waiter.Mutex("hot").Lock(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock = %v, want DeadlineExceeded", err)
	}
	if calls := scriptCalls(t, nodes[2].(*redis.Client)) - before; calls > 20 {
		t.Fatalf("the waiter sent %d scripts to the free node in 2s: it spins", calls)
	}
}

// A FairMutex TryLock whose grant lands after its ctx ended must not leave the lock held.
func TestFairTryLockTimeoutLeavesNothing(t *testing.T) {
	srv, rdb := standalone(t)
	p := faultproxy.New(t, srv.Addr)
	p.SetLatency(t, 50*time.Millisecond)
	via := redis.NewClient(&redis.Options{Addr: p.Addr})
	t.Cleanup(func() { _ = via.Close() })
	c := newClient(t, via)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if _, err := c.FairMutex("ft").TryLock(ctx); err == nil {
		t.Fatal("TryLock through 50ms of latency with a 20ms ctx succeeded")
	}
	waitFor(t, 5*time.Second, "the late grant to be undone", func() bool {
		return rdb.Exists(context.Background(), "dlock:ft").Val() == 0
	})
}

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

func TestDoUnlocksWhenFnPanics(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not go on after Do")
			}
		}()
		_ = c.Mutex("p").Do(ctx, func(context.Context) error { panic("boom") })
	}()
	if l, err := newClient(t, rdb).Mutex("p").TryLock(ctx); err != nil {
		t.Fatalf("after fn panicked in Do, the lock is still held: %v", err)
	} else {
		_ = l.Unlock(ctx)
	}
}

func TestInnerExtendAfterUnlock(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	m := c.Mutex("in")
	outer := mustLock(t, m, ctx)
	inner := mustLock(t, m, outer.Context())
	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	err := inner.Extend(ctx, time.Second)
	if !errors.Is(err, dlock.ErrNotHeld) || errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Extend of an unlocked inner lease = %v, want ErrNotHeld (released, not lost)", err)
	}
	_ = outer.Unlock(ctx)
}
