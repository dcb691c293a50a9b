package dlockotel

import (
	"sync"

	"github.com/seed51c676c8/dlock"
)

// calls attributes attempts to the Lock, TryLock or Acquire call that made them, for the
// verdict on the call's span. dlock's events name the lock of an attempt, not its call, so
// an attempt is attributed only while it is unambiguous: while one call of its lock
// (name and kind) is under way in the process. Once two calls of a lock overlap, neither
// is given a verdict, until none is under way again. Goroutines of one process that wait
// for the same Mutex queue locally and only the first makes attempts, but a TryLock, a
// Semaphore's or a reader's calls may attempt side by side.
type calls struct {
	mu sync.Mutex
	m  map[lockKey]callState // guarded by mu: the locks with calls under way
}

// callState is what is known of the calls under way of one lock.
type callState struct {
	open    int           // calls under way
	shared  bool          // two calls overlapped since open was last 0
	tried   bool          // an attempt was made since open was last 0
	verdict dlock.Verdict // the last attempt's
}

func newCalls() *calls { return &calls{m: make(map[lockKey]callState)} }

func (c *calls) started(name, kind string) {
	k := lockKey{name, kind}
	c.mu.Lock()
	s := c.m[k]
	s.open++
	s.shared = s.shared || s.open > 1
	c.m[k] = s
	c.mu.Unlock()
}

func (c *calls) attempted(name, kind string, v dlock.Verdict) {
	k := lockKey{name, kind}
	c.mu.Lock()
	if s, ok := c.m[k]; ok {
		s.tried, s.verdict = true, v
		c.m[k] = s
	}
	c.mu.Unlock()
}

// ended ends a call and returns the verdict of its last attempt, if it is known to be its
// own (ok false: no attempt, or calls overlapped).
func (c *calls) ended(name, kind string) (v dlock.Verdict, ok bool) {
	k := lockKey{name, kind}
	c.mu.Lock()
	defer c.mu.Unlock()
	s, found := c.m[k]
	if !found { // a call that started before the observer saw it: nothing to say
		return 0, false
	}
	v, ok = s.verdict, s.tried && !s.shared
	if s.open--; s.open <= 0 {
		delete(c.m, k)
	} else {
		c.m[k] = s
	}
	return v, ok
}
