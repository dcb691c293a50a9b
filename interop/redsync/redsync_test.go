package redsync_test

import (
	"context"
	"errors"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-redsync/redsync/v4"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
)

// ttl is long, so that a waiter woken by the lease's expiry rather than the release
// would take seconds; promptly is the generous bound on a release's hand-over on a loaded
// machine (a waiter that was told, or redsync polling every retryDelay, takes
// milliseconds).
const (
	ttl        = 30 * time.Second
	promptly   = time.Second
	retryDelay = 10 * time.Millisecond
)

// locker is one side's lock on the shared key: dlock's Mutex or redsync's.
type locker interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
}

// side makes lockers of one library on a server.
type side struct {
	name      string
	newLocker func(s *dlocktest.RedisServer, key string) locker
	polls     bool // its waiter retries every retryDelay rather than being told
}

var sides = []side{
	{"dlock", func(s *dlocktest.RedisServer, key string) locker {
		return &dlockLocker{m: s.NewClient(dlock.WithPrefix("")).Mutex(key, dlock.TTL(ttl))}
	}, false},
	{"redsync", func(s *dlocktest.RedisServer, key string) locker {
		rs := redsync.New(goredis.NewPool(s.Client()))
		return &redsyncLocker{rs: rs, key: key}
	}, true},
}

type dlockLocker struct {
	m     *dlock.Mutex
	lease *dlock.Lease
}

func (l *dlockLocker) Lock(ctx context.Context) (err error) {
	l.lease, err = l.m.Lock(ctx)
	return err
}

func (l *dlockLocker) Unlock(ctx context.Context) error { return l.lease.Unlock(ctx) }

// redsyncLocker makes a redsync Mutex per Lock: one holds the value of one acquisition.
type redsyncLocker struct {
	rs  *redsync.Redsync
	key string
	m   *redsync.Mutex
}

func (l *redsyncLocker) Lock(ctx context.Context) error {
	l.m = l.rs.NewMutex(l.key, redsync.WithExpiry(ttl), redsync.WithRetryDelay(retryDelay), redsync.WithTries(math.MaxInt32))
	return l.m.LockContext(ctx)
}

func (l *redsyncLocker) Unlock(ctx context.Context) error {
	ok, err := l.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock: the key no longer held this mutex's value")
	}
	return err
}

// TestMutualExclusion: goroutines of both libraries take the same key in turn. The
// counter is read and written back under the lock with a pause in between, so that two
// holders at once lose an increment; none may be lost, and no two may be inside at once.
func TestMutualExclusion(t *testing.T) {
	srv := dlocktest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	const perGoroutine = 15
	var counter, inside, overlaps atomic.Int64
	var wg sync.WaitGroup
	workers := 0
	for _, s := range sides {
		for range 3 {
			l := s.newLocker(srv, "shared")
			workers++
			wg.Go(func() {
				for range perGoroutine {
					if err := l.Lock(ctx); err != nil {
						t.Errorf("%s Lock: %v", s.name, err)
						return
					}
					if inside.Add(1) != 1 {
						overlaps.Add(1)
					}
					v := counter.Load()
					time.Sleep(time.Millisecond)
					counter.Store(v + 1)
					inside.Add(-1)
					if err := l.Unlock(ctx); err != nil {
						t.Errorf("%s Unlock: %v", s.name, err)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Errorf("%d times a holder found another inside", n)
	}
	if got, want := counter.Load(), int64(workers*perGoroutine); got != want {
		t.Errorf("counter = %d after %d locked increments: %d lost", got, want, want-got)
	}
}

// TestPromptHandOver: in both directions, the other library's waiter gets the key soon
// after the holder releases it, not at its expiry: a dlock waiter is told of redsync's
// compare-and-delete by CLIENT TRACKING (the server has its default configuration), and
// redsync's retries find the key dlock deleted.
func TestPromptHandOver(t *testing.T) {
	srv := dlocktest.Start(t)
	for _, holder := range sides {
		for _, waiter := range sides {
			if holder.name == waiter.name {
				continue
			}
			t.Run(holder.name+" to "+waiter.name, func(t *testing.T) {
				ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
				defer cancel()
				key := "handover-" + holder.name
				h, w := holder.newLocker(srv, key), waiter.newLocker(srv, key)
				if err := h.Lock(ctx); err != nil {
					t.Fatal(err)
				}
				got := make(chan time.Time, 1)
				go func() {
					defer close(got)
					if err := w.Lock(ctx); err != nil {
						t.Errorf("%s waiter: %v", waiter.name, err)
						return
					}
					got <- time.Now()
				}()
				time.Sleep(200 * time.Millisecond) // the waiter is waiting
				if !waiter.polls {
					// Told, not re-checking: nothing while the key is held (one attempt
					// at most, if the waiter was slow to start).
					before := scriptCalls(t, srv.Client())
					time.Sleep(500 * time.Millisecond)
					if n := scriptCalls(t, srv.Client()) - before; n > 2 {
						t.Errorf("the %s waiter sent %d scripts in 500ms while the key was held: it re-checks", waiter.name, n)
					}
				}
				select {
				case <-got:
					t.Fatalf("the %s waiter got the key while %s held it", waiter.name, holder.name)
				default:
				}
				released := time.Now()
				if err := h.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
				at, ok := <-got
				if !ok {
					t.FailNow()
				}
				took := at.Sub(released)
				t.Logf("the %s waiter got the key %v after the %s holder released it", waiter.name, took, holder.name)
				if took > promptly {
					t.Errorf("the %s waiter took %v after the release (lease %v)", waiter.name, took, ttl)
				}
				if err := w.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			})
		}
	}
}

// scriptCalls returns how many scripts (EVAL, EVALSHA) the server has run.
func scriptCalls(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	info, err := rdb.Info(context.Background(), "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, line := range strings.Split(info, "\n") {
		for _, cmd := range []string{"cmdstat_eval:calls=", "cmdstat_evalsha:calls="} {
			if rest, ok := strings.CutPrefix(line, cmd); ok {
				n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
				total += n
			}
		}
	}
	return total
}
