package engine

import (
	"slices"
	"sync"
	"time"
)

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
