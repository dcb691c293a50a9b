package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock"
	dlockprom "github.com/seed51c676c8/dlock/extra/prometheus"

	"github.com/seed51c676c8/dlock/examples/internal/exredis"
)

// lockName is the name of lock i.
func lockName(i int) string { return fmt.Sprintf("observe:job:%d", i) }

// work runs the workers until ctx ends, every Client observed by metrics. It returns the
// first error that is not the end of ctx.
func work(ctx context.Context, srv *exredis.Server, metrics *dlockprom.Collector, o options) error {
	clients := make([]*dlock.Client, o.procs)
	for i := range clients {
		rdb := srv.NewClient()
		defer rdb.Close()
		clients[i] = dlock.New(rdb, dlock.WithObserver(metrics.Observer()))
		defer clients[i].Close()
	}
	var wg sync.WaitGroup
	errs := make(chan error, o.workers)
	for w := range o.workers {
		wg.Go(func() {
			if err := worker(ctx, clients[w%len(clients)], o); err != nil {
				errs <- err
			}
		})
	}
	wg.Wait()
	close(errs)
	return <-errs // nil when closed empty
}

// worker takes locks until ctx ends: the first locks more often than the last (the
// smaller of two random picks), one turn in four with TryLock.
func worker(ctx context.Context, client *dlock.Client, o options) error {
	for turn := 0; ctx.Err() == nil; turn++ {
		m := client.Mutex(lockName(min(rand.IntN(o.locks), rand.IntN(o.locks))))
		var lease *dlock.Lease
		var err error
		if turn%4 == 3 {
			lease, err = m.TryLock(ctx)
		} else {
			wctx, cancel := context.WithTimeout(ctx, o.patience)
			lease, err = m.Lock(wctx)
			cancel()
		}
		switch {
		case errors.Is(err, dlock.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded), ctx.Err() != nil:
			continue // counted by the metrics; the loop ends with ctx
		case err != nil:
			return err
		}
		pause(ctx, o.hold/2+rand.N(o.hold)) // the work: hold/2 to 3*hold/2
		if err := unlock(ctx, lease); err != nil {
			return err
		}
		pause(ctx, o.hold/4) // between jobs
	}
	return nil
}

// unlock releases lease, even once ctx has ended, within a bound of its own. A lease
// that was lost meanwhile is no error here: the metrics count it.
func unlock(ctx context.Context, lease *dlock.Lease) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	if err := lease.Unlock(ctx); err != nil && !errors.Is(err, dlock.ErrNotHeld) && !errors.Is(err, dlock.ErrLost) {
		return err
	}
	return nil
}

// pause sleeps for d or until ctx ends.
func pause(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
}
