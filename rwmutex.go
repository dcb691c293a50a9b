package dlock

import (
	"context"
	"fmt"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// RWMutex is a distributed reader/writer lock: any number of readers or one writer.
//
// A writer that waits keeps new readers out, so a stream of readers cannot starve it;
// readers that hold the lock keep it until they leave. Each reader is its own lease: a
// dead reader's hold ends with its own TTL, without shortening or lengthening the others'.
//
// Re-entry by context works for both modes. A writer may take the read lock with its write
// lease's context (downgrade): the read lease is granted at once and outlives the write
// lease if the writer then unlocks it. The reverse, Lock with a read lease's context
// (upgrade), is refused with an error at once: two readers upgrading together would wait
// for each other forever.
//
// On a quorum Client both modes count with a majority: a writer's majority and any
// reader's majority share a node, which refuses one of them.
type RWMutex struct {
	read, write *target
}

// RWMutex returns the reader/writer lock called name.
func (c *Client) RWMutex(name string, opts ...LockOption) *RWMutex {
	return &RWMutex{read: newTarget(c, readScheme{}, name, opts), write: newTarget(c, writeScheme{}, name, opts)}
}

// RLock takes a read lock, waiting while a writer holds the lock or waits for it, until ctx
// is done.
func (rw *RWMutex) RLock(ctx context.Context) (*Lease, error) { return rw.rlock(ctx, false) }

// TryRLock makes one attempt to take a read lock; ErrNotAcquired if a writer holds the lock
// or waits for it.
func (rw *RWMutex) TryRLock(ctx context.Context) (*Lease, error) { return rw.rlock(ctx, true) }

// Lock takes the write lock, waiting until no reader or writer holds it, until ctx is done.
// While it waits, new readers wait too.
func (rw *RWMutex) Lock(ctx context.Context) (*Lease, error) { return rw.lock(ctx, false) }

// TryLock makes one attempt to take the write lock; ErrNotAcquired if anyone holds it.
func (rw *RWMutex) TryLock(ctx context.Context) (*Lease, error) { return rw.lock(ctx, true) }

func (rw *RWMutex) rlock(ctx context.Context, try bool) (*Lease, error) {
	r := &request{try: try}
	if rw.read.err == nil {
		if w := heldIn(ctx, rw.read.c, writeScheme{}.kind(), rw.read.keys.Lock); w != nil {
			r.owner, _ = w.token.(string) // downgrade
		}
	}
	return rw.read.lock(ctx, r)
}

func (rw *RWMutex) lock(ctx context.Context, try bool) (*Lease, error) {
	if rw.write.err == nil && heldIn(ctx, rw.write.c, readScheme{}.kind(), rw.write.keys.Lock) != nil &&
		heldIn(ctx, rw.write.c, writeScheme{}.kind(), rw.write.keys.Lock) == nil {
		return nil, fmt.Errorf("dlock: RWMutex %q: cannot upgrade a read lock to the write lock: unlock the read lease first (two readers upgrading at once would wait for each other forever)", rw.write.name)
	}
	return rw.write.lock(ctx, &request{try: try})
}

func rwKeys(t *target) []string {
	return []string{t.keys.Lock, t.keys.Fence, t.keys.Readers(), t.keys.Writers()}
}

func rwChannels(t *target, n *node) []notify.Channel {
	return []notify.Channel{releaseChannel(t, n), keyspaceChannel(n, t.keys.Lock)}
}

// readScheme: each reader is a member of a sorted set with its own lease end.
type readScheme struct{}

func (readScheme) kind() string { return "read" }

func (readScheme) acquire(t *target, r *request, token any, call *batch.Call) {
	call.Script = scripts.RwReadAcquire
	call.Keys = rwKeys(t)
	call.Args = []any{token, t.ttlArg, r.owner}
}

func (readScheme) release(t *target, token any, publish string, call *batch.Call) {
	readers := t.keys.Readers()
	call.Script = scripts.MemberRelease
	call.Keys = []string{readers, readers}
	call.Args = []any{token, t.keys.Channel, publish}
}

func (readScheme) extend(t *target, token any, ttl string, set bool, call *batch.Call) {
	readers := t.keys.Readers()
	call.Script = scripts.MemberExtend
	call.Keys = []string{readers, readers}
	call.Args = []any{token, ttl, extendMode(set)}
}

func (readScheme) leave(*target, *request, *batch.Call) bool { return false }
func (readScheme) need(n int) int                            { return mutexScheme{}.need(n) }
func (readScheme) channels(t *target, _ *request, n *node) []notify.Channel {
	return rwChannels(t, n)
}
func (readScheme) policy() policy { return policy{reentrant: true} }

// writeScheme: the write lock is a Mutex's string key; a waiting writer is listed, with a
// deadline it refreshes, to keep new readers out.
type writeScheme struct{}

func (writeScheme) kind() string { return "write" }

func (writeScheme) acquire(t *target, r *request, token any, call *batch.Call) {
	call.Script = scripts.RwWriteAcquire
	call.Keys = rwKeys(t)
	call.Args = []any{token, t.ttlArg, r.waiter, waiterTTLArg, flagArg(r.try)}
}

func (writeScheme) release(t *target, token any, publish string, call *batch.Call) {
	mutexScheme{}.release(t, token, publish, call)
}

func (writeScheme) extend(t *target, token any, ttl string, set bool, call *batch.Call) {
	mutexScheme{}.extend(t, token, ttl, set, call)
}

func (writeScheme) leave(t *target, r *request, call *batch.Call) bool {
	writers := t.keys.Writers()
	call.Script = scripts.WaiterLeave
	call.Keys = []string{writers, writers}
	call.Args = []any{r.waiter, t.keys.Channel, t.c.nodes[call.Node].publishCommand()}
	return true
}

func (writeScheme) need(n int) int { return mutexScheme{}.need(n) }
func (writeScheme) channels(t *target, _ *request, n *node) []notify.Channel {
	return rwChannels(t, n)
}
func (writeScheme) policy() policy {
	return policy{waitList: true, reentrant: true, coordinate: queueLocally}
}
