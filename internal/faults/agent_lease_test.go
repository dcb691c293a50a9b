package faults

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// holding is what the agent needs of a lease: *dlock.Lease, or the broken control
// lease of the nonx mutation.
type holding interface {
	Token() uint64
	ValidUntil() time.Time
	Context() context.Context
	Done() <-chan struct{}
	Err() error
	Extend(ctx context.Context, ttl time.Duration) error
	Unlock(ctx context.Context) error
}

// held is a lease the agent took, under the parent's id.
type held struct {
	l        holding
	name     string
	unlockAt atomic.Int64 // when Unlock was called: the holder stops believing then
	endSeen  atomic.Int64 // when the holder's own code first saw the lease ended, if before its watcher
}

// seen records that the holder's code saw at t that the lease had ended, if it had: its
// watcher may be scheduled later than that.
func (h *held) seen(t time.Time) {
	if h.l.Err() != nil {
		h.endSeen.CompareAndSwap(0, t.UnixNano())
	}
}

// opTimeout bounds the requests of one command that gives no bound of its own.
const opTimeout = 10 * time.Second

// lock takes a lease (Lock, or TryLock with cmd.Try, bounded by cmd.Wait) and reports it
// with evAcquired, then its end with evEnded.
func (a *agent) lock(cmd command) {
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(cmd.Wait, opTimeout))
	defer cancel()
	l, err := a.acquire(ctx, cmd)
	if err != nil {
		a.fail(cmd, err)
		return
	}
	a.adopt(cmd, l)
}

// adopt records a lease under cmd.ID, reports it and watches for its end.
func (a *agent) adopt(cmd command, l holding) *held {
	h := &held{l: l, name: cmd.Name}
	a.mu.Lock()
	a.leases[cmd.ID] = h
	a.mu.Unlock()
	a.emit(event{Ev: evAcquired, ID: cmd.ID, Name: cmd.Name, Token: l.Token(), Valid: l.ValidUntil().UnixNano()})
	a.watchers.Go(func() { a.watch(cmd.ID, h) })
	return h
}

// watch reports the end of a lease: when the holder stopped believing in it (Unlock
// called, or the end seen) and its last ValidUntil.
func (a *agent) watch(id string, h *held) {
	<-h.l.Done()
	at := time.Now().UnixNano()
	for _, t := range []int64{h.unlockAt.Load(), h.endSeen.Load()} {
		if t != 0 && t < at {
			at = t
		}
	}
	how := endLost
	if errors.Is(h.l.Err(), dlock.ErrReleased) {
		how = endReleased
	}
	a.emit(event{Ev: evEnded, ID: id, Name: h.name, At: at, Valid: h.l.ValidUntil().UnixNano(), Err: how})
}

func (a *agent) lease(cmd command) (*held, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	h, ok := a.leases[cmd.ID]
	if !ok {
		return nil, fmt.Errorf("no lease %q", cmd.ID)
	}
	return h, nil
}

// onLease runs f on the lease cmd.ID, bounded by opTimeout, and reports the outcome.
func (a *agent) onLease(cmd command, f func(ctx context.Context, h *held) error) {
	h, err := a.lease(cmd)
	if err == nil {
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		err = f(ctx, h)
	}
	a.report(cmd, err)
}

// unlock unlocks a lease; the naive mutation deletes its key instead, as a library
// without compare-and-delete would.
func (a *agent) unlock(cmd command) {
	a.onLease(cmd, func(ctx context.Context, h *held) error {
		h.unlockAt.Store(time.Now().UnixNano())
		if a.cfg.Mutation == mutNaive {
			return a.onNodes(ctx, func(c *redis.Client) error { return c.Del(ctx, lockKey(h.name)).Err() })
		}
		return h.l.Unlock(ctx)
	})
}

// extend extends a lease to cmd.TTL; the naive mutation sets the key's TTL instead.
func (a *agent) extend(cmd command) {
	a.onLease(cmd, func(ctx context.Context, h *held) error {
		if a.cfg.Mutation == mutNaive {
			return a.onNodes(ctx, func(c *redis.Client) error { return c.PExpire(ctx, lockKey(h.name), cmd.TTL).Err() })
		}
		return h.l.Extend(ctx, cmd.TTL)
	})
}

// report ends a command with evDone or evFailed.
func (a *agent) report(cmd command, err error) {
	if err != nil {
		a.fail(cmd, err)
		return
	}
	a.emit(event{Ev: evDone, ID: cmd.ID, Op: cmd.Op})
}

// write makes one fenced write with the lease's token, without looking at the lease
// first: the write of a holder that was paused between its check and its write.
func (a *agent) write(cmd command) {
	h, err := a.lease(cmd)
	if err != nil {
		a.fail(cmd, err)
		return
	}
	a.fencedWrite(cmd.ID, h)
}

// work writes every cmd.Every while the lease lasts, checking it before each write as
// code under a lock must; the ignore-ctx mutation writes on for cmd.Wait regardless.
func (a *agent) work(cmd command) {
	h, err := a.lease(cmd)
	if err != nil {
		a.fail(cmd, err)
		return
	}
	until := time.Now().Add(cmp.Or(cmd.Wait, opTimeout))
	for time.Now().Before(until) {
		if a.cfg.Mutation != mutIgnoreCtx && (h.l.Err() != nil || h.l.Context().Err() != nil) {
			break
		}
		a.fencedWrite(cmd.ID, h)
		time.Sleep(cmp.Or(cmd.Every, 10*time.Millisecond))
	}
	a.emit(event{Ev: evDone, ID: cmd.ID, Op: cmd.Op})
}

func (a *agent) fencedWrite(id string, h *held) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	at := time.Now().UnixNano()
	ok, err := a.storeWrite(ctx, h.name, h.l.Token(), a.cfg.Name, at)
	if err != nil {
		a.emit(event{Ev: evFailed, ID: id, Op: "write", Err: err.Error()})
		return
	}
	a.emit(event{Ev: evWrote, ID: id, Name: h.name, Token: h.l.Token(), At: at, OK: ok})
}
