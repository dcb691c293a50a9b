package engine

import (
	"context"
	"fmt"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// RW is the engine of an RWMutex: its read lock and its write lock, one name.
type RW struct {
	read, write *Target
}

// NewRWMutex returns the engine of the RWMutex called name; cfgErr is an invalid option.
func NewRWMutex(c *Client, name string, cfg LockConfig, cfgErr error) *RW {
	return &RW{read: newTarget(c, readScheme{}, name, cfg, cfgErr), write: newTarget(c, writeScheme{}, name, cfg, cfgErr)}
}

// RLock takes a read lock: one attempt if try is set. With the context of a write lease of
// the same lock, it downgrades.
func (rw *RW) RLock(ctx context.Context, try bool) (*Lease, error) {
	r := &request{t: rw.read, try: try}
	if rw.read.err == nil {
		if w := heldIn(ctx, rw.read.c, writeScheme{}.kind(), rw.read.keys.Lock); w != nil {
			r.owner, _ = w.token.(string) // downgrade
		}
	}
	return r.lock(ctx)
}

// Lock takes the write lock: one attempt if try is set. With the context of a read lease
// of the same lock it is refused (upgrade).
func (rw *RW) Lock(ctx context.Context, try bool) (*Lease, error) {
	if rw.write.err == nil && heldIn(ctx, rw.write.c, readScheme{}.kind(), rw.write.keys.Lock) != nil &&
		heldIn(ctx, rw.write.c, writeScheme{}.kind(), rw.write.keys.Lock) == nil {
		return nil, fmt.Errorf("dlock: RWMutex %q: cannot upgrade a read lock to the write lock: unlock the read lease first (two readers upgrading at once would wait for each other forever)", rw.write.name)
	}
	return (&request{t: rw.write, try: try}).lock(ctx)
}

func rwKeys(t *Target) []string {
	return []string{t.keys.Lock, t.keys.Fence, t.keys.Readers(), t.keys.Writers(), t.keys.Gone}
}

func rwChannels(t *Target, n *Node) []notify.Channel {
	return []notify.Channel{n.releaseChannel(t), n.keyspaceChannel(t.keys.Lock)}
}

// readScheme: each reader is a member of a sorted set with its own lease end.
type readScheme struct{}

func (readScheme) kind() string { return KindRead }

func (readScheme) acquire(t *Target, r *request, token any, call *batch.Call) {
	call.Script = scripts.RwReadAcquire
	call.Keys = rwKeys(t)
	call.Args = []any{token, t.ttlArg, r.owner}
}

func (readScheme) release(t *Target, token any, publish string, call *batch.Call) {
	readers := t.keys.Readers()
	call.Script = scripts.MemberRelease
	call.Keys = []string{readers, readers}
	call.Args = []any{token, t.keys.Channel, publish}
}

func (readScheme) extend(t *Target, token any, ttl string, call *batch.Call) {
	readers := t.keys.Readers()
	call.Script = scripts.MemberExtend
	call.Keys = []string{readers, readers, t.keys.Gone}
	call.Args = []any{token, ttl}
}

func (readScheme) leave(*Target, *request, *batch.Call) bool { return false }
func (readScheme) need(n int) int                            { return mutexScheme{}.need(n) }
func (readScheme) channels(t *Target, _ *request, n *Node) []notify.Channel {
	return rwChannels(t, n)
}
func (readScheme) policy() policy { return policy{reentrant: true} }

// writeScheme: the write lock is a Mutex's string key; a waiting writer is listed, with a
// deadline it refreshes, to keep new readers out.
type writeScheme struct{}

func (writeScheme) kind() string { return KindWrite }

func (writeScheme) acquire(t *Target, r *request, token any, call *batch.Call) {
	call.Script = scripts.RwWriteAcquire
	call.Keys = rwKeys(t)
	call.Args = []any{token, t.ttlArg, r.waiter, waiterTTLArg, flagArg(r.try), flagArg(len(t.c.nodes) == 1)}
}

func (writeScheme) release(t *Target, token any, publish string, call *batch.Call) {
	mutexScheme{}.release(t, token, publish, call)
}

func (writeScheme) extend(t *Target, token any, ttl string, call *batch.Call) {
	mutexScheme{}.extend(t, token, ttl, call)
}

func (writeScheme) leave(t *Target, r *request, call *batch.Call) bool {
	writers := t.keys.Writers()
	call.Script = scripts.WaiterLeave
	call.Keys = []string{writers, writers}
	call.Args = []any{r.waiter, t.keys.Channel, t.c.nodes[call.Node].PublishCommand()}
	return true
}

func (writeScheme) need(n int) int { return mutexScheme{}.need(n) }
func (writeScheme) channels(t *Target, _ *request, n *Node) []notify.Channel {
	return rwChannels(t, n)
}
func (writeScheme) policy() policy {
	return policy{waitList: true, reentrant: true, coordinate: queueLocally}
}
