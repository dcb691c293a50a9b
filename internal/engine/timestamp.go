package engine

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
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

// sharing: a TimestampMutex queues locally, by lock key, with the other kinds of its name.
func (stampScheme) sharing(t *Target) sharing { return queued{t} }

// stamp is the token of a TimestampMutex hold: the deadlines it has written to the key.
// Renewals and Extends rewrite the deadline, and several may be in flight at once and
// land in another order than they were sent (see Hold), so the hold owns the key while it
// holds any deadline the hold may still find there: each is kept for twice the lease
// length it was written with (a key that still held it by then would have expired, or the
// hold would have been lost for want of a renewal), the newest always, and at most
// maxStamps of them.
//
// The release's call carries the deadlines owned when it is made, and a renewal or an
// Extend made after it may still land before it (renewals go out on a pipeline of their
// own): had it written a new deadline, the release would find the key not its own, and
// the key would stay locked for a whole TTL. So the release makes the stamp final, and
// from then on write writes no new deadline, only the newest one again, which the release
// owns.
type stamp struct {
	book *stampBook // the Client's, which keeps the deadlines of its holds apart; nil: none
	key  string     // the lock key, in book
	// id names the attempt's tombstone (gone.lua), which every renewal of its hold keeps:
	// deadlines are not unique across clients, so a tombstone named after one would
	// refuse another client's acquisition that happened to write the same number.
	id string

	mu      sync.Mutex
	written []stamped // guarded by mu: oldest first
	final   bool      // guarded by mu: a release took the deadlines owned; none is added
}

type stamped struct {
	deadline any       // decimal unix ms, boxed once: the scripts take it as an argument
	forget   time.Time // when it can no longer be in the key while the hold lives
}

// maxStamps bounds the deadlines a hold remembers, and so a renewal's arguments.
const maxStamps = 32

// write records the deadline ttl after now (on the wall clock) that the caller is about to
// write, and returns it with the deadlines the key may hold before it lands. Once the
// stamp is final, the deadline it returns is the newest one already written.
func (s *stamp) write(now time.Time, ttl time.Duration) (deadline any, owned []any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	owned = s.ownedLocked(now)
	if n := len(s.written); s.final && n > 0 {
		return s.written[n-1].deadline, owned
	}
	forget := now.Add(2 * ttl)
	value := ms(s.book.claim(s.key, s, now.Add(ttl).UnixMilli(), now, forget))
	if n := len(s.written); n > 0 && s.written[n-1].deadline == any(value) {
		if last := &s.written[n-1]; forget.After(last.forget) { // the same millisecond
			last.forget = forget
		}
		return s.written[n-1].deadline, owned
	}
	if len(s.written) == maxStamps {
		s.written = append(s.written[:0], s.written[1:]...)
	}
	s.written = append(s.written, stamped{deadline: value, forget: forget})
	return value, owned
}

// owned returns the deadlines the key may hold, oldest first.
func (s *stamp) owned(now time.Time) []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.ownedLocked(now)
}

// release returns the deadlines the key may hold, for the release's call, and makes the
// stamp final: whatever is sent later writes one of them.
func (s *stamp) release(now time.Time) []any {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.final = true
	return s.ownedLocked(now)
}

// ownedLocked forgets the deadlines whose time has passed, except the newest, and returns
// the rest. The caller holds mu.
func (s *stamp) ownedLocked(now time.Time) []any {
	keep := s.written[:0]
	for i, w := range s.written {
		if i == len(s.written)-1 || now.Before(w.forget) {
			keep = append(keep, w)
		}
	}
	s.written = keep
	owned := make([]any, len(keep))
	for i, w := range keep {
		owned[i] = w.deadline
	}
	return owned
}

// stampBook keeps the deadlines of one Client's TimestampMutex holds apart: each key's
// deadlines that a hold (a stamp) of the Client has written, until it can no longer be in
// the key. A deadline is a hold's only mark, and a release carries every deadline its
// hold may still find in the key: were a later hold of the same Client to write one of
// them, that release, landing late, would delete the later hold's key. So a new deadline
// moves forward a millisecond at a time until no other stamp of the Client owns it. That
// shortens no lease; it lengthens one by a millisecond per hold of the key in excess of
// one a millisecond within the last two lease lengths (a tight loop of Lock and Unlock),
// and the key's expiry still ends a crashed holder's key one lease length after it was
// written. The holds of other processes cannot be kept apart so: that is the protocol's
// limit (timestampmutex.go).
type stampBook struct {
	mu      sync.Mutex
	keys    map[string][]stampClaim // guarded by mu: by lock key, claims not yet forgotten
	sweepAt int                     // guarded by mu: the number of keys at which to drop the idle ones
}

type stampClaim struct {
	deadline int64
	by       *stamp
	// forget is when its stamp forgets it too (stamp.write: twice the lease length after
	// it was written, so a lease length after the deadline). Another hold writes a
	// deadline a lease length before it at most, so it cannot write this one later,
	// unless the wall clock steps back by more than the two lease lengths: the limit the
	// stamp has anyway.
	forget time.Time
}

// claim returns the first deadline from want up that no stamp of the Client but s owns on
// key, and records it as s's until forget. A nil book keeps nothing apart.
func (b *stampBook) claim(key string, s *stamp, want int64, now, forget time.Time) int64 {
	if b == nil {
		return want
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	claims := b.liveLocked(key, now)
	for ownedByOther(claims, s, want) {
		want++
	}
	i := slices.IndexFunc(claims, func(c stampClaim) bool { return c.by == s && c.deadline == want })
	if i >= 0 { // written again within its millisecond
		claims[i].forget = later(claims[i].forget, forget)
	} else {
		claims = append(claims, stampClaim{deadline: want, by: s, forget: forget})
	}
	b.keys[key] = claims
	return want
}

func ownedByOther(claims []stampClaim, s *stamp, deadline int64) bool {
	return slices.ContainsFunc(claims, func(c stampClaim) bool { return c.by != s && c.deadline == deadline })
}

// liveLocked returns key's claims not yet forgotten at now, dropping the others, and
// from time to time the keys that have none left. The caller holds mu.
func (b *stampBook) liveLocked(key string, now time.Time) []stampClaim {
	if b.keys == nil {
		b.keys = make(map[string][]stampClaim)
	}
	if len(b.keys) >= b.sweepAt {
		for k, claims := range b.keys {
			if live := forgetLocked(claims, now); len(live) > 0 || k == key {
				b.keys[k] = live
			} else {
				delete(b.keys, k)
			}
		}
		b.sweepAt = max(64, 2*len(b.keys)) // one sweep per doubling: amortised
	}
	return forgetLocked(b.keys[key], now)
}

// forgetLocked drops the claims forgotten at now, in place.
func forgetLocked(claims []stampClaim, now time.Time) []stampClaim {
	live := claims[:0]
	for _, c := range claims {
		if now.Before(c.forget) {
			live = append(live, c)
		}
	}
	clear(claims[len(live):]) // let the stamps of dropped claims go
	return live
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
