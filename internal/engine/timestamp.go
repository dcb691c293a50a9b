package engine

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// The legacy SETNX + GETSET timestamp protocol (stamp_acquire.lua has the recipe). Its key
// holds the holder's deadline, in unix milliseconds by the holder's own clock, and every
// client compares it with its own clock. So this kind, unlike every other, computes its
// deadlines from the client's wall clock, not from Redis TIME: the protocol's other
// clients cannot be made to read Redis's clock, and a deadline they cannot compare with
// theirs would not exclude them.
//
// Choices, and why:
//   - The check-and-set is one script (SETNX, GET, compare, and the GETSET step), so
//     dlock's own clients never race each other in the GETSET step, and the fencing
//     counter is raised with the acquisition. To the other clients the script is one
//     SETNX or one GETSET that won: they cannot tell it from a client of the recipe.
//   - The key also gets an expiry (PX) of the lease length, which the other clients do
//     not set. It does not weaken exclusion: it runs out no sooner than the deadline by
//     the holder's clock, after which the protocol lets anyone take the lock anyway. It
//     removes the key of a holder that crashed (with no expiry it would stay until some
//     client took it over), and it bounds what a dlock client whose clock runs fast can
//     do: its deadline, far ahead by others' clocks, cannot keep them out past the lease
//     length. A GETSET by another client drops the expiry, as the recipe expects.
//   - Ownership is the value: a hold owns the key while the key holds a deadline the hold
//     wrote (stamp). A deadline is not unique: another client whose clock and lease
//     length make it write the very same number would pass for the holder, which could
//     then renew or delete that client's lock. dlock's own writes never repeat the value
//     they replace (a deadline taken over has passed, and the new one is in the future),
//     so the holder a dlock client displaces always sees that it lost; nothing can make
//     the other clients do the same.
//   - Within one Client, no two holds of a key own the same deadline (stampBook): a new
//     deadline moves forward a millisecond past those that another hold of the Client
//     owns. Else a release that lands late, after a later hold of the same process wrote
//     the very same millisecond (acquired within the millisecond of the release, or with
//     another lease length), would find that hold's deadline its own and delete its key.

// notStampPrefix begins the error that stamp_acquire.lua returns for a key that holds
// something that is not a deadline.
const notStampPrefix = "NOTSTAMP"

// errTimestampQuorum is the error of a TimestampMutex on a quorum Client.
var errTimestampQuorum = errors.New("dlock: TimestampMutex needs a single Redis deployment: the protocol's key holds a deadline and no owner token, so the votes of independent quorum nodes cannot be counted as one holder's; use a Mutex on a quorum (once every client of the key is dlock or a Redlock client), or a TimestampMutex on one deployment (standalone, Sentinel or Cluster)")

// TimestampMutex is the engine of a TimestampMutex.
type TimestampMutex struct {
	t *Target
}

// NewTimestampMutex returns the engine of the TimestampMutex called name; cfgErr is an
// invalid option. On a quorum Client every method returns an error.
func NewTimestampMutex(c *Client, name string, cfg LockConfig, cfgErr error) *TimestampMutex {
	t := newTarget(c, name, cfg, cfgErr, func(*Target) scheme { return stampScheme{} })
	if t.err == nil && len(c.nodes) > 1 {
		t.err = errTimestampQuorum
	}
	return &TimestampMutex{t: t}
}

// Lock acquires the lock: one attempt if try is set. An error that says the key holds no
// deadline also wraps ErrNotTimestamp (stampScheme.wrapError).
func (m *TimestampMutex) Lock(ctx context.Context, try bool) (*Lease, error) {
	return m.t.Lock(ctx, try)
}

// stampScheme: a plain string key holding the holder's deadline (stamp_*.lua).
type stampScheme struct{ plain }

func (stampScheme) kind() string { return KindTimestamp }

func (stampScheme) newToken(t *Target) any {
	return &stamp{book: &t.c.stamps, key: t.keys.Lock, id: newToken()}
}

func (stampScheme) acquire(t *Target, _ *request, a *ticket, call *batch.Call) {
	now := time.Now()
	s := a.token.(*stamp)
	deadline, _ := s.write(now, t.cfg.TTL)
	call.Script = scripts.StampAcquire
	call.Keys = []string{t.keys.Lock, t.keys.Fence, t.keys.Gone}
	call.Args = []any{ms(now.UnixMilli()), deadline, t.ttlArg, s.id}
}

// wrapError marks the error of an attempt that found a key holding no deadline, so that
// Lock returns it, and the observers see it, wrapping ErrNotTimestamp.
func (stampScheme) wrapError(err error) error {
	if err != nil && redis.HasErrorPrefix(err, notStampPrefix) {
		return fmt.Errorf("%w: %w", ErrNotTimestamp, err)
	}
	return err
}

func (stampScheme) release(t *Target, token any, publish string, call *batch.Call) {
	call.Script = scripts.StampRelease
	call.Keys, call.KeyArgs = t.lockKeys, t.lockKeyArgs
	call.Args = append([]any{t.keys.Channel, publishArg(publish)}, token.(*stamp).release(time.Now())...)
}

func (stampScheme) extend(t *Target, token any, ttl string, call *batch.Call) {
	length, _ := strconv.ParseInt(ttl, 10, 64) // ms() made it
	s := token.(*stamp)
	deadline, owned := s.write(time.Now(), time.Duration(length)*time.Millisecond)
	call.Script = scripts.StampExtend
	call.Keys, call.KeyArgs = t.extendKeys, t.extendKeyArgs
	call.Args = append([]any{deadline, ttl, s.id}, owned...)
}

func (stampScheme) need(n int) int { return quorum.Majority(n) }

func (stampScheme) channels(t *Target, _ *request, n *Node) []notify.Channel {
	return []notify.Channel{n.releaseChannel(t.keys.Channel), n.keyspaceChannel(t.keys.Lock)}
}

func (stampScheme) policy() policy { return policy{reentrant: true, track: true} }

// waitsFor: a TimestampMutex finds that a key of another kind holds no deadline
// (ErrNotTimestamp) and fails at once, unless it queues behind other in this process
// first (the local queue is by lock key: queue.go).
func (stampScheme) waitsFor(other *Hold) bool { return other.t.share.queues() }

// sharing: a TimestampMutex queues locally, by lock key, with the other kinds of its name.
func (stampScheme) sharing(t *Target) sharing { return queued{t} }
