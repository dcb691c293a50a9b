package faults

import (
	"context"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock"
)

// controlLease is the lock of the nonx mutation, a lock broken on purpose: a plain SET
// without NX on the first node, so it excludes no one; its token comes from INCR, so
// tokens still grow; and it never learns that it lost anything: its context ends only
// when it is unlocked. The checks that catch it show that they can fail.
type controlLease struct {
	a     *agent
	name  string
	token uint64
	ctx   context.Context
	end   context.CancelCauseFunc

	mu    sync.Mutex
	valid time.Time
}

func (a *agent) controlLock(ctx context.Context, name string, ttl time.Duration) (holding, error) {
	rdb := a.nodes[0]
	start := time.Now()
	tok, err := rdb.Incr(ctx, fenceKey(name)).Uint64()
	if err != nil {
		return nil, err
	}
	if err := rdb.Set(ctx, lockKey(name), tok, ttl).Err(); err != nil {
		return nil, err
	}
	lctx, end := context.WithCancelCause(context.Background())
	return &controlLease{a: a, name: name, token: tok, ctx: lctx, end: end, valid: start.Add(ttl)}, nil
}

func (l *controlLease) Token() uint64            { return l.token }
func (l *controlLease) Context() context.Context { return l.ctx }
func (l *controlLease) Done() <-chan struct{}    { return l.ctx.Done() }

func (l *controlLease) ValidUntil() time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.valid
}

func (l *controlLease) Err() error {
	if l.ctx.Err() != nil {
		return context.Cause(l.ctx)
	}
	return nil
}

func (l *controlLease) Extend(ctx context.Context, ttl time.Duration) error {
	start := time.Now()
	if err := l.a.nodes[0].PExpire(ctx, lockKey(l.name), ttl).Err(); err != nil {
		return err
	}
	l.mu.Lock()
	l.valid = start.Add(ttl)
	l.mu.Unlock()
	return nil
}

func (l *controlLease) Unlock(ctx context.Context) error {
	err := l.a.nodes[0].Del(ctx, lockKey(l.name)).Err()
	l.end(dlock.ErrReleased)
	return err
}
