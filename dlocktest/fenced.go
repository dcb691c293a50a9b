package dlocktest

import (
	"errors"
	"fmt"
	"sync"
)

// ErrStaleToken is what FencedStore.Put refuses a write with when its fencing token is
// older than the newest one the store has seen for the key.
var ErrStaleToken = errors.New("dlocktest: stale fencing token")

// FencedStore is an in-memory map that checks fencing tokens, as the storage that a lock
// protects should: it remembers, per key, the largest token of a write it accepted, and
// refuses a write with a smaller one. A holder that was paused past its lease, and wakes
// believing it still holds the lock, carries an older token than the holder after it, so
// its write is refused instead of overwriting newer data. Use it in tests of code that
// writes under a lock, in place of the real storage, to see that the code passes the
// lease's Token along.
//
// The zero value is an empty store. It is safe for concurrent use.
type FencedStore[V any] struct {
	mu     sync.Mutex
	values map[string]V
	tokens map[string]uint64 // the token of the newest accepted write, per key
}

// Put stores value under key, carrying the fencing token of the lease it was written
// under. If the store has accepted a write to key with a larger token, it keeps what it
// has and returns an error wrapping ErrStaleToken. A token equal to the newest is
// accepted: one holder may write many times.
func (s *FencedStore[V]) Put(key string, value V, token uint64) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if newest, ok := s.tokens[key]; ok && token < newest {
		return fmt.Errorf("%w: write to %q with token %d, but token %d has written there", ErrStaleToken, key, token, newest)
	}
	if s.values == nil {
		s.values, s.tokens = make(map[string]V), make(map[string]uint64)
	}
	s.values[key], s.tokens[key] = value, token
	return nil
}

// Get returns the value stored under key, and whether there is one.
func (s *FencedStore[V]) Get(key string) (value V, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	value, ok = s.values[key]
	return value, ok
}

// Token returns the fencing token of the newest write accepted under key, 0 if none.
func (s *FencedStore[V]) Token(key string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.tokens[key]
}
