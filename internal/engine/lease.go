package engine

import (
	"context"
	"fmt"
	"sync"
	"time"
)

// Lease is the engine's side of one public dlock.Lease, whose doc comments are the
// contract of these methods: the outer lease of a hold, or a re-entrant one sharing it.
// The public type is defined on this one (type Lease engine.Lease), so that a *Lease the
// engine returns is the public lease by a conversion, with no allocation or pointer
// between them.
type Lease struct {
	h     *Hold
	outer bool
	ctx   context.Context // a re-entrant lease's; the outer lease's is its hold's (Hold.context)

	// For a re-entrant lease only: its own end, guarded by mu.
	mu     sync.Mutex
	err    error
	cancel context.CancelCauseFunc
	stop   func() bool // stops the propagation of the hold's end
}

func (l *Lease) Name() string { return l.h.t.name }

func (l *Lease) Token() uint64 { return l.h.fence }

func (l *Lease) Tokens() map[string]uint64 {
	h := l.h
	names := h.t.scheme.names(h.t)
	out := make(map[string]uint64, len(names))
	for _, name := range names {
		out[name] = h.fence
	}
	return out
}

func (l *Lease) Context() context.Context {
	if l.outer {
		return l.h.context()
	}
	return l.ctx
}

func (l *Lease) Done() <-chan struct{} { return l.Context().Done() }

func (l *Lease) Err() error {
	if !l.outer {
		l.mu.Lock()
		err := l.err
		l.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return l.h.state()
}

func (l *Lease) ValidUntil() time.Time { return l.h.validUntil() }

func (l *Lease) Extend(ctx context.Context, ttl time.Duration) error {
	if err := l.endedErr("extend"); err != nil {
		return err
	}
	if err := CheckTTL(ttl); err != nil {
		return err
	}
	return l.h.extend(ctx, ttl)
}

// endedErr returns the error of op on l once l has ended, nil while it is held.
func (l *Lease) endedErr(op string) error {
	if err := l.Err(); err != nil {
		if !l.outer && l.h.state() == nil {
			return fmt.Errorf("dlock: %s %q: %w: %w (this re-entrant lease was unlocked)", op, l.h.t.name, Inner(ErrNotHeld), Inner(err))
		}
		return l.h.endedError(op)
	}
	return nil
}

func (l *Lease) Unlock(ctx context.Context) error {
	if l.outer {
		return l.h.release(ctx)
	}
	l.mu.Lock()
	if l.err != nil {
		l.mu.Unlock()
		return fmt.Errorf("dlock: unlock %q: %w: %w (already unlocked)", l.h.t.name, Inner(ErrNotHeld), Inner(l.err))
	}
	if err := l.h.state(); err != nil {
		l.mu.Unlock()
		return l.h.endedError("unlock")
	}
	l.err = ErrReleased
	l.mu.Unlock()
	l.stop()
	l.cancel(ErrReleased)
	return nil
}
