package dlock

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// Guard sends the Redis commands fn queues on pipe so that Redis applies them only while
// the lease still holds its lock (for a Semaphore or a read lease, its own hold), and
// otherwise none: the hold and the commands are checked and run in one script, with the
// server's clock, so a holder that wakes from a pause or a call that lands late writes
// nothing after the lease's end. Refused so, or on a lease that has ended here, it returns
// an error wrapping ErrNotHeld and ErrLost (or ErrReleased). fn only queues; if it returns
// an error, nothing is sent and Guard returns it. Otherwise Guard returns the commands,
// their replies typed as in a go-redis pipeline, and the first command's error as Exec
// does. As in MULTI, a failed command undoes nothing. Commands whose replies Guard cannot
// type (streams, geo) are refused before sending; pipe.Do sends any, untyped. ctx bounds
// the request; after an error without a reply, the commands ran only if they landed in
// time. On a Cluster every key must share the lock's slot (see Key), else Guard refuses
// before sending; on a quorum, or for a TimestampMutex, it refuses. A Mutex handed on
// within one process keeps its token, so Redis cannot tell its leases apart: Guard refuses
// a lease ended here, but what it sent before is applied. docs/guard.md has the details.
func (l *Lease) Guard(ctx context.Context, fn func(pipe redis.Pipeliner) error) ([]redis.Cmder, error) {
	return l.e().Guard(ctx, fn)
}

// Key returns a key of the caller's own, name, in the lock's hash slot: the lock's hash
// tag in braces, "/" and name ("{dlock:sale}/stock" for the Mutex "sale"), never one of
// the lock's own keys.
func (l *Lease) Key(name string) string { return l.e().Key(name) }
