package engine

import (
	"context"
	"fmt"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// RW is the engine of an RWMutex: its read lock and its write lock, one name.
type RW struct {
	read, write *Target
}

// NewRWMutex returns the engine of the RWMutex called name; cfgErr is an invalid option.
func NewRWMutex(c *Client, name string, cfg LockConfig, cfgErr error) *RW {
	read := newTarget(c, name, cfg, cfgErr, func(t *Target) scheme { return &readScheme{keys: rwKeys(t)} })
	write := newTarget(c, name, cfg, cfgErr, func(t *Target) scheme {
		return &writeScheme{keys: rwKeys(t), mutex: newMutexKeys(t, false)}
	})
	return &RW{read: read, write: write}
}

// RLock takes a read lock: one attempt if try is set. With the context of a write lease of
// the same lock, it downgrades.
func (rw *RW) RLock(ctx context.Context, try bool) (*Lease, error) {
	r := &request{t: rw.read, try: try}
	if rw.read.err == nil {
		if w := heldIn(ctx, rw.read.c, KindWrite, rw.read.keys.Lock); w != nil {
			r.owner, _ = w.token.(string) // downgrade
		}
	}
	return r.lock(ctx)
}

// Lock takes the write lock: one attempt if try is set. With the context of a read lease
// of the same lock it is refused (upgrade).
func (rw *RW) Lock(ctx context.Context, try bool) (*Lease, error) {
	if rw.write.err == nil && heldIn(ctx, rw.write.c, KindRead, rw.write.keys.Lock) != nil &&
		heldIn(ctx, rw.write.c, KindWrite, rw.write.keys.Lock) == nil {
		return nil, fmt.Errorf("dlock: RWMutex %q: cannot upgrade a read lock to the write lock: unlock the read lease first (two readers upgrading at once would wait for each other forever)", rw.write.name)
	}
	return (&request{t: rw.write, try: try}).lock(ctx)
}

func rwKeys(t *Target) []string {
	return []string{t.keys.Lock, t.keys.Fence, t.keys.Readers(), t.keys.Writers(), t.keys.Gone}
}

func rwChannels(t *Target, n *Node) []notify.Channel {
	return []notify.Channel{n.releaseChannel(t.keys.Channel), n.keyspaceChannel(t.keys.Lock)}
}

// readScheme: each reader is a member of a sorted set with its own lease end.
type readScheme struct {
	plain
	keys []string // lock, fence, readers, writers, gone; read-only
}

func (*readScheme) kind() string { return KindRead }

func (s *readScheme) acquire(t *Target, r *request, a *ticket, call *batch.Call) {
	call.Script = scripts.RwReadAcquire
	call.Keys = s.keys
	call.Args = []any{a.token, t.ttlArg, r.owner}
}

func (*readScheme) release(t *Target, token any, publish string, call *batch.Call) {
	readers := t.keys.Readers()
	call.Script = scripts.MemberRelease
	call.Keys = []string{readers, readers}
	call.Args = []any{token, t.keys.Channel, publish}
}

func (*readScheme) extend(t *Target, token any, ttl string, call *batch.Call) {
	readers := t.keys.Readers()
	call.Script = scripts.MemberExtend
	call.Keys = []string{readers, readers, t.keys.Gone}
	call.Args = []any{token, ttl}
}

// waitsFor: an RLock under its RWMutex's write lease downgrades.
func (*readScheme) waitsFor(other *Hold) bool { return other.t.scheme.kind() != KindWrite }

func (*readScheme) need(n int) int             { return quorum.Majority(n) }
func (*readScheme) exclusive(*Target) []string { return nil }
func (*readScheme) policy() policy             { return policy{reentrant: true} }
func (*readScheme) channels(t *Target, _ *request, n *Node) []notify.Channel {
	return rwChannels(t, n)
}

// writeScheme: the write lock is a Mutex's string key; a waiting writer is listed, with a
// deadline it refreshes, to keep new readers out. Writers of one process queue locally.
type writeScheme struct {
	plain
	keys  []string   // as readScheme's
	mutex *mutexKeys // a writer releases as a Mutex does, taking no turns
}

func (*writeScheme) kind() string { return KindWrite }

func (s *writeScheme) acquire(t *Target, r *request, a *ticket, call *batch.Call) {
	call.Script = scripts.RwWriteAcquire
	call.Keys = s.keys
	call.Args = []any{a.token, t.ttlArg, r.waiter, waiterTTLArg, flagArg(r.try), flagArg(len(t.c.nodes) == 1)}
}

func (s *writeScheme) release(t *Target, token any, publish string, call *batch.Call) {
	mutexRelease(s.mutex, t.c, token, publish, releaseMode, noArg, call)
}

func (*writeScheme) extend(t *Target, token any, ttl string, call *batch.Call) {
	mutexExtend(t, token, ttl, call)
}

func (*writeScheme) leave(t *Target, r *request, call *batch.Call) bool {
	writers := t.keys.Writers()
	call.Script = scripts.WaiterLeave
	call.Keys = []string{writers, writers}
	call.Args = []any{r.waiter, t.keys.Channel, t.c.nodes[call.Node].PublishCommand()}
	return true
}

func (*writeScheme) need(n int) int { return quorum.Majority(n) }
func (*writeScheme) channels(t *Target, _ *request, n *Node) []notify.Channel {
	return rwChannels(t, n)
}
func (*writeScheme) policy() policy            { return policy{waitList: true, reentrant: true} }
func (*writeScheme) sharing(t *Target) sharing { return queued{t} }
