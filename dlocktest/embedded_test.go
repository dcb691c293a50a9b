package dlocktest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// locker is what every kind of lock can do, a Semaphore through permits.
type locker interface {
	Lock(ctx context.Context) (*dlock.Lease, error)
	TryLock(ctx context.Context) (*dlock.Lease, error)
}

// permits makes a Semaphore a locker that takes n permits.
type permits struct {
	s *dlock.Semaphore
	n int64
}

func (p permits) Lock(ctx context.Context) (*dlock.Lease, error)    { return p.s.Acquire(ctx, p.n) }
func (p permits) TryLock(ctx context.Context) (*dlock.Lease, error) { return p.s.TryAcquire(ctx, p.n) }

// TestEmbeddedRunsEveryKind: dlock's scripts run on the embedded Redis, between two
// Clients as between two processes: every kind excludes, hands over on Unlock, and passes
// to the next holder when a lease expires.
func TestEmbeddedRunsEveryKind(t *testing.T) {
	kinds := []struct {
		name string
		lock func(c *dlock.Client, opts ...dlock.LockOption) locker
	}{
		{"mutex", func(c *dlock.Client, opts ...dlock.LockOption) locker { return c.Mutex("job", opts...) }},
		{"fair", func(c *dlock.Client, opts ...dlock.LockOption) locker { return c.FairMutex("job", opts...) }},
		{"rw", func(c *dlock.Client, opts ...dlock.LockOption) locker { return c.RWMutex("job", opts...) }},
		{"semaphore", func(c *dlock.Client, opts ...dlock.LockOption) locker {
			return permits{c.Semaphore("job", 2, opts...), 2}
		}},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			addr := startEmbedded(t)
			a := newClient(t, newRedisClient(t, &redis.Options{Addr: addr}), nil)
			b := newClient(t, newRedisClient(t, &redis.Options{Addr: addr}), nil)
			handOver(t, k.lock(a), k.lock(b))
			expire(t, k.lock(a, dlock.TTL(100*time.Millisecond), dlock.NoRenew()), k.lock(b))
		})
	}
}

// handOver: while a holds the lock, b's TryLock is refused and b's Lock waits; a's Unlock
// passes it to b, with a larger fencing token.
func handOver(t *testing.T, a, b locker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := a.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while held: %v, want ErrNotAcquired", err)
	}
	next := make(chan *dlock.Lease, 1)
	go func() {
		lease, err := b.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		next <- lease
	}()
	time.Sleep(50 * time.Millisecond)
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	second := <-next
	if second == nil {
		t.FailNow()
	}
	if second.Token() <= first.Token() {
		t.Errorf("token after the hand-over %d, before %d", second.Token(), first.Token())
	}
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// expire: a lease that is not renewed ends at its TTL, and a waiter gets the lock then.
func expire(t *testing.T, short, b locker) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	first, err := short.TryLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	second, err := b.Lock(ctx)
	if err != nil {
		t.Fatalf("Lock after the holder's lease ran out: %v", err)
	}
	defer second.Unlock(ctx)
	if err := first.Err(); !errors.Is(err, dlock.ErrLost) {
		t.Errorf("the first lease: %v, want ErrLost", err)
	}
}
