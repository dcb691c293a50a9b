package faults

import (
	"cmp"
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// contend takes the lock cmd.Name from cmd.N goroutines, again and again, for cmd.Wait.
// In each hold it reads the largest token the data has seen and does a read-modify-write
// of a counter: lost updates and overlapping holds show a second holder. When done it
// reports every hold (evHold), then evDone with the holds in N, the failed calls in M and
// the first failure in Err.
func (a *agent) contend(cmd command) {
	until := time.Now().Add(cmd.Wait)
	var mu sync.Mutex
	var holds []event
	var fails int64
	var firstErr string
	var wg sync.WaitGroup
	for range cmd.N {
		wg.Go(func() {
			for time.Now().Before(until) {
				h, held, err := a.holdOnce(cmd, until)
				if a.cfg.Mutation == mutPoll {
					time.Sleep(min(2*cmd.TTL, time.Until(until))) // a poller comes back on its schedule, not when woken
				}
				mu.Lock()
				if held {
					holds = append(holds, h)
				}
				if err != nil {
					fails++
					firstErr = cmp.Or(firstErr, err.Error())
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, h := range holds {
		a.emit(h)
	}
	a.emit(event{Ev: evDone, ID: cmd.ID, Op: cmd.Op, N: int64(len(holds)), M: fails, Err: firstErr})
}

// holdOnce takes the lock, does the checked increment under it and unlocks; it reports
// whether it held the lock, and what failed. A Lock may wait until two TTLs after the
// loop's end: everyone stops then, so it must get the lock by then.
func (a *agent) holdOnce(cmd command, until time.Time) (h event, held bool, err error) {
	ctx, cancel := context.WithDeadline(context.Background(), until.Add(2*cmd.TTL))
	defer cancel()
	l, err := a.contendLock(ctx, cmd)
	if err != nil {
		return event{}, false, err
	}
	h = event{Ev: evHold, Name: cmd.Name, Token: l.Token(), At: time.Now().UnixNano()}
	err = a.increment(ctx, cmd.Name, &h)
	h.End = time.Now().UnixNano()
	return h, true, errors.Join(err, l.Unlock(ctx))
}

// contendLock is Lock, or what the mutation puts in its place.
func (a *agent) contendLock(ctx context.Context, cmd command) (holding, error) {
	switch a.cfg.Mutation {
	case mutNoNX:
		return a.controlLock(ctx, cmd.Name, cmd.TTL)
	case mutPoll:
		return a.pollLock(ctx, cmd)
	}
	return a.client.Mutex(cmd.Name, dlock.TTL(cmd.TTL)).Lock(ctx)
}

// The data the contention scenarios protect, on the storage server.
func counterKey(name string) string   { return "data:" + name + ":counter" }
func lastTokenKey(name string) string { return "data:" + name + ":last" }

// increment is the critical section: it records the largest token seen before (h.Last)
// and the counter's value (h.N), and increments the counter with a read and a write.
func (a *agent) increment(ctx context.Context, name string, h *event) error {
	last, err := a.store.Get(ctx, lastTokenKey(name)).Uint64()
	if err != nil && err != redis.Nil {
		return err
	}
	n, err := a.store.Get(ctx, counterKey(name)).Int64()
	if err != nil && err != redis.Nil {
		return err
	}
	h.Last, h.N = last, n
	if err := a.store.Set(ctx, counterKey(name), n+1, 0).Err(); err != nil {
		return err
	}
	return a.store.Set(ctx, lastTokenKey(name), h.Token, 0).Err()
}
