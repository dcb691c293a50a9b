package engine

import "context"

// queued is the sharing of kinds whose goroutines queue locally (sharing.go): waiters of
// one process for one lock key wait in order in the key's localQueue (local.go), and only
// the head asks Redis. The queue is by lock key, so an RWMutex writer and a TimestampMutex
// of one name, which share the key, queue together.
type queued struct {
	t *Target
}

func (k queued) join(ctx context.Context, r *request) error {
	t := k.t
	r.local = &r.wait
	t.c.local.join(t.keys.Lock, ctx, t.cfg, r.local)
	select {
	case <-r.local.turn:
		return nil
	case <-ctx.Done():
		return gaveUp(t.name, ctx, -1)
	case <-t.c.done:
		return ErrClosed
	}
}

// leave takes the caller out of the local queue, whatever the wait came to: a hold handed
// over as the caller gave up is released. The last local waiter of a process with a
// standing request withdraws it, whatever its kind: the queue is by lock key, so a
// writer or a TimestampMutex may queue behind the Mutex waiter that made it.
func (k queued) leave(ctx context.Context, r *request) {
	t := k.t
	untaken, ask := t.c.local.leave(t.keys.Lock, r.local)
	if untaken != nil {
		release, cancel := context.WithTimeout(context.WithoutCancel(ctx), nodeTimeout(t.c, t.cfg.TTL))
		_ = untaken.release(release)
		cancel()
	}
	if ask != nil {
		withdraw(t, ask)
	}
}

func (k queued) heldHere() *Hold { return k.t.c.local.heldHere(k.t.keys.Lock) }

func (k queued) fromProcess(_ context.Context, r *request) (*Hold, bool) {
	return k.t.c.local.takeHandoff(k.t.keys.Lock, r.local), false
}

func (k queued) changed(r *request, always bool) <-chan struct{} {
	return k.t.c.local.changed(k.t.keys.Lock, r.local, always)
}

func (k queued) prepare(r *request) { alone{}.prepare(r) }

func (queued) acquired(_ *request, counter uint64) (uint64, uint64) { return counter, 0 }
func (queued) handOff(*Hold) bool                                   { return false }
func (queued) rejoin()                                              {}
func (queued) refreshes() bool                                      { return false }
func (queued) queues() bool                                         { return true }
