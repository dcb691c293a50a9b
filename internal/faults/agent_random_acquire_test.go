package faults

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed51c676c8/dlock"
)

// rndAcquire takes n permits (1 for the kinds without) of the lock s on c: with one
// attempt if try, else waiting until ctx ends. The poll mutation waits by TryLock every
// four TTLs instead: with several pollers at random phases, one every two TTLs left the
// lock free for over 500ms (the free-time bound) in some seeds only, such as 64157323.
func (a *agent) rndAcquire(ctx context.Context, c *dlock.Client, s rndSpec, try bool, n int64) (*dlock.Lease, error) {
	if a.cfg.Mutation == mutPoll && !try {
		return rndPoll(ctx, c, s, n)
	}
	opts := []dlock.LockOption{dlock.TTL(s.TTL)}
	if s.NoRenew {
		opts = append(opts, dlock.NoRenew())
	}
	name := s.Names[0]
	switch s.Kind {
	case "mutex":
		m := c.Mutex(name, opts...)
		return pick(try, m.TryLock, m.Lock)(ctx)
	case "multi":
		m := c.MultiMutex(s.Names, opts...)
		return pick(try, m.TryLock, m.Lock)(ctx)
	case "fair":
		m := c.FairMutex(name, opts...)
		return pick(try, m.TryLock, m.Lock)(ctx)
	case "ts":
		m := c.TimestampMutex(name, opts...)
		return pick(try, m.TryLock, m.Lock)(ctx)
	case "read":
		rw := c.RWMutex(name, opts...)
		return pick(try, rw.TryRLock, rw.RLock)(ctx)
	case "write":
		rw := c.RWMutex(name, opts...)
		return pick(try, rw.TryLock, rw.Lock)(ctx)
	case "sem":
		sem := c.Semaphore(name, s.Size, opts...)
		return pick(try, sem.TryAcquire, sem.Acquire)(ctx, n)
	}
	return nil, fmt.Errorf("unknown kind %q", s.Kind)
}

// rndPoll waits the way dlock does not (the poll mutation): one attempt, then four TTLs
// of sleep, whatever happens meanwhile.
func rndPoll(ctx context.Context, c *dlock.Client, s rndSpec, n int64) (*dlock.Lease, error) {
	for {
		l, err := (&agent{cfg: agentConfig{}}).rndAcquire(ctx, c, s, true, n)
		if !errors.Is(err, dlock.ErrNotAcquired) {
			return l, err
		}
		select {
		case <-time.After(4 * s.TTL):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}
