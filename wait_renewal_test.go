package dlock_test

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// TestWaitersIgnoreRenewals: where keyspace events are on, a holder's renewals (each a
// PEXPIRE, published as "expire") free nothing and wake no waiter: across several renewals
// a waiter of each kind that listens for keyspace events attempts about as often as its
// own timers say (the holder's time left, its refresh), not once per renewal; and it still
// takes the lock once the holder releases it. A waiter that tracks the key instead (a
// TimestampMutex, a Mutex on a quorum or bare keys: tracking.go) is woken by any write to
// it, a renewal's included: an invalidation does not say what the write was.
func TestWaitersIgnoreRenewals(t *testing.T) {
	t.Parallel()
	const ttl = 600 * time.Millisecond
	type locker interface {
		Lock(context.Context) (*dlock.Lease, error)
	}
	kinds := []struct {
		name    string
		attempt *redis.Script // the waiter's attempt
		lock    func(c *dlock.Client) locker
	}{
		{"Mutex", scripts.MutexAcquire, func(c *dlock.Client) locker { return c.Mutex("renewed", dlock.TTL(ttl)) }},
		{"FairMutex", scripts.FairAcquire, func(c *dlock.Client) locker { return c.FairMutex("renewed", dlock.TTL(ttl)) }},
		{"RWMutex", scripts.RwWriteAcquire, func(c *dlock.Client) locker { return c.RWMutex("renewed", dlock.TTL(ttl)) }},
	}
	for _, k := range kinds {
		t.Run(k.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t, redistest.WithArgs("--notify-keyspace-events", "Kgx"))
			ctx := ctxTimeout(t, 30*time.Second)
			hook := &scriptHook{seen: map[string]int{}}
			rdb := redis.NewClient(srv.Options())
			t.Cleanup(func() { _ = rdb.Close() })
			rdb.AddHook(hook)
			holder, waiter := k.lock(newClient(t, srv.Client(t))), k.lock(newClient(t, rdb))
			held, err := holder.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := make(chan error, 1)
			go func() {
				l, err := waiter.Lock(ctx)
				if err == nil {
					err = l.Unlock(ctx)
				}
				got <- err
			}()
			const window = 3 * time.Second
			time.Sleep(window)
			attempts := hook.count(k.attempt)
			renewals := int(window / (ttl / 3))
			t.Logf("across about %d renewals the waiter attempted %d times", renewals, attempts)
			// Its own timers attempt about every TTL (the holder's time left); a wake-up
			// per renewal attempts at least once each.
			if 3*attempts > 2*renewals {
				t.Errorf("the waiter attempted %d times across about %d renewals: the renewals wake it", attempts, renewals)
			}
			if err := held.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-got:
				if err != nil {
					t.Fatal(err)
				}
			case <-time.After(2 * time.Second):
				t.Fatal("the waiter did not take the lock within 2s of its release")
			}
		})
	}
}
