package engine

import (
	"context"
	"errors"
	"fmt"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/guard"
	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// The refusals of Guard before anything is sent, for a lock that has no one place to
// write beside.
var (
	errGuardQuorum = errors.New("dlock: a quorum has no single store that could check the lock and apply the writes in one step: Guard needs a Client of one deployment (New)")
	errGuardStamp  = errors.New("dlock: a TimestampMutex's key holds a deadline, not a token Redis could check")
)

// Guard runs the commands fn queues in one script that runs them only if the hold still
// holds its lock when it lands (internal/guard says why a script). See dlock.Lease.Guard.
func (l *Lease) Guard(ctx context.Context, fn func(redis.Pipeliner) error) ([]redis.Cmder, error) {
	h := l.h
	if err := l.endedErr("guard"); err != nil {
		return nil, err
	}
	mode, keys, err := guardKeys(h.t)
	if err != nil {
		return nil, fmt.Errorf("dlock: guard %q: %w", h.t.name, Inner(err))
	}
	node := h.c.nodes[0]
	pipe := guard.NewPipe(node.RDB)
	if err := fn(pipe); err != nil {
		return nil, err
	}
	cmds := pipe.Cmds()
	if err := guardable(ctx, node, keys[0], cmds); err != nil {
		err = fmt.Errorf("dlock: guard %q: %w", h.t.name, Inner(err))
		guard.Fail(cmds, err)
		return cmds, err
	}
	// fn may have run past the lease's end: a lease ended here sends nothing, since a
	// hand-off in this process leaves the key with the same token (Lease.Guard).
	if err := l.endedErr("guard"); err != nil {
		guard.Fail(cmds, err)
		return cmds, err
	}
	reply, err := guard.Run(ctx, node.RDB, keys, guard.Args([]any{h.token, mode}, cmds))
	if err != nil {
		err = fmt.Errorf("dlock: guard %q: %w", h.t.name, err)
		guard.Fail(cmds, err)
		return cmds, err
	}
	return cmds, guarded(h, cmds, reply)
}

// guarded gives cmds their replies from guard.lua's reply, and returns Guard's error: the
// first command's, or the refusal of a hold that no longer holds its lock, which ends it.
func guarded(h *Hold, cmds []redis.Cmder, reply any) error {
	replies, held := reply.([]any)
	if !held && reply != int64(0) {
		err := fmt.Errorf("dlock: guard %q: the script replied %v", h.t.name, reply)
		guard.Fail(cmds, err)
		return err
	}
	if !held {
		h.lost("a Guard found that the lock no longer holds its token")
		err := fmt.Errorf("dlock: guard %q: %w: %w (the lock no longer holds its token in Redis; nothing was applied)", h.t.name, Inner(ErrNotHeld), Inner(ErrLost))
		guard.Fail(cmds, err)
		return err
	}
	if err := guard.Fill(cmds, replies); err != nil {
		return err
	}
	return guard.FirstErr(cmds)
}

// guardKeys returns how guard.lua checks a hold of t and the keys it checks, or why t
// cannot be guarded.
func guardKeys(t *Target) (mode string, keys []string, err error) {
	switch {
	case len(t.c.nodes) > 1:
		return "", nil, errGuardQuorum
	case len(t.parts) > 1:
		return "", nil, fmt.Errorf("dlock: the MultiMutex's names span %d Redis Cluster hash slots, and one script can write in one only: give the names one hash tag, such as {orders}:1 and {orders}:2", len(t.parts))
	}
	switch t.scheme.kind() {
	case KindRead:
		return "m", []string{t.keys.Readers()}, nil
	case KindSemaphore:
		holders, _ := semKeys(t)
		return "m", []string{holders}, nil
	case KindTimestamp:
		return "", nil, errGuardStamp
	}
	return "s", t.scheme.exclusive(t), nil
}

// guardable returns nil if cmds can be sent, guarded, to node: go-redis types each reply
// and, on a Cluster, every key shares the slot of lockKey.
func guardable(ctx context.Context, node *Node, lockKey string, cmds []redis.Cmder) error {
	for _, c := range cmds {
		if err := guard.Supported(c); err != nil {
			return err
		}
	}
	if !node.cluster {
		return nil
	}
	return guard.CheckSlot(ctx, node.RDB, keyspace.Slot(lockKey), lockKey, cmds)
}

// Key is a key of the caller's own in the lock's hash slot (dlock.Lease.Key).
func (l *Lease) Key(name string) string { return l.h.t.keys.Data(name) }
