package faults

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed51c676c8/dlock"
)

// acquire takes a lease of the kind cmd names.
func (a *agent) acquire(ctx context.Context, cmd command) (holding, error) {
	opts := lockOptions(cmd)
	var l *dlock.Lease
	var err error
	switch cmd.Kind {
	case "", "mutex":
		switch {
		case a.cfg.Mutation == mutNoNX:
			return a.controlLock(ctx, cmd.Name, cmp.Or(cmd.TTL, dlock.DefaultTTL))
		case a.cfg.Mutation == mutPoll && !cmd.Try:
			return a.pollLock(ctx, cmd)
		}
		m := a.client.Mutex(cmd.Name, opts...)
		l, err = pick(cmd.Try, m.TryLock, m.Lock)(ctx)
	case "elect":
		return a.campaign(ctx, cmd)
	case "fair":
		m := a.client.FairMutex(cmd.Name, opts...)
		l, err = pick(cmd.Try, m.TryLock, m.Lock)(ctx)
	case "read":
		rw := a.client.RWMutex(cmd.Name, opts...)
		l, err = pick(cmd.Try, rw.TryRLock, rw.RLock)(ctx)
	case "write":
		rw := a.client.RWMutex(cmd.Name, opts...)
		l, err = pick(cmd.Try, rw.TryLock, rw.Lock)(ctx)
	case "sem":
		s := a.client.Semaphore(cmd.Name, cmd.Size, opts...)
		if cmd.Try {
			l, err = s.TryAcquire(ctx, cmd.N)
		} else {
			l, err = s.Acquire(ctx, cmd.N)
		}
	default:
		return nil, fmt.Errorf("unknown kind %q", cmd.Kind)
	}
	if err != nil {
		return nil, err
	}
	return l, nil
}

func pick[F any](try bool, tryFn, waitFn F) F {
	if try {
		return tryFn
	}
	return waitFn
}

// releaseAfter unlocks l after cmd.Short, if cmd.Short is set.
func (a *agent) releaseAfter(cmd command, l holding) {
	if cmd.Short == 0 {
		return
	}
	time.Sleep(cmd.Short)
	a.mu.Lock()
	h := a.leases[cmd.ID]
	a.mu.Unlock()
	h.unlockAt.Store(time.Now().UnixNano())
	_ = l.Unlock(context.Background())
}

// grab tries the lock (one attempt at a time, whatever the attempts say) every cmd.Every
// until it has it or cmd.Wait has passed, and holds it for cmd.Short if set: a client
// that pounces the moment the lock looks free, rather than waiting to be woken.
func (a *agent) grab(cmd command) {
	until := time.Now().Add(cmd.Wait)
	try := cmd
	try.Try = true
	var err error
	for time.Now().Before(until) {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		var l holding
		l, err = a.acquire(ctx, try)
		cancel()
		if err == nil {
			a.adopt(cmd, l)
			a.releaseAfter(cmd, l)
			return
		}
		time.Sleep(cmp.Or(cmd.Every, 10*time.Millisecond))
	}
	a.fail(cmd, err)
}

// pollLock waits the way dlock does not: TryLock, and sleep two TTLs between tries.
func (a *agent) pollLock(ctx context.Context, cmd command) (holding, error) {
	m := a.client.Mutex(cmd.Name, dlock.TTL(cmd.TTL))
	for {
		l, err := m.TryLock(ctx)
		if !errors.Is(err, dlock.ErrNotAcquired) {
			return l, err
		}
		select {
		case <-time.After(2 * cmd.TTL):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
