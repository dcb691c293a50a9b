package dlock

import (
	"context"
	"fmt"

	"github.com/seed51c676c8/dlock/internal/engine"
)

// Semaphore hands out at most size permits at once. Each acquisition is a lease like a
// Mutex's (renewed, lost, unlocked), so the permits of a holder that dies come back after
// its TTL. Requests are served in order: while an earlier request waits, later ones wait
// behind it, so a large request is not starved by small ones; a waiter that dies is skipped
// within 3 seconds. Every handle of one name must use the same size.
//
// On a quorum Client of N nodes an acquisition must be granted by
// floor(size*N/(size+1)) + 1 nodes (a majority when size is 1): fewer would let size+1
// holders each find room on enough nodes. With size >= N-1 that is every node. Waiters are
// then not served in order: independent nodes cannot agree on one.
type Semaphore struct {
	t    *engine.Target
	size int64
}

// Semaphore returns the semaphore called name with size permits. A size below 1 is
// reported by every method.
func (c *Client) Semaphore(name string, size int64, opts ...LockOption) *Semaphore {
	cfg, err := newLockConfig(opts)
	return &Semaphore{t: engine.NewSemaphore(c.e, name, size, cfg, err), size: size}
}

// Acquire takes n permits, waiting in order until they are free or ctx is done. The lease
// holds all n; Unlock returns them. n must be between 1 and the size. A Semaphore is not
// re-entrant: an Acquire whose ctx carries live leases of the same Client on this
// semaphore returns an error at once if their permits and n exceed the size, since it
// would wait for itself.
func (s *Semaphore) Acquire(ctx context.Context, n int64) (*Lease, error) {
	return s.acquire(ctx, n, false)
}

// TryAcquire takes n permits only if they are free now and no one waits; it never waits.
func (s *Semaphore) TryAcquire(ctx context.Context, n int64) (*Lease, error) {
	return s.acquire(ctx, n, true)
}

// Do runs fn while holding n permits, like Mutex.Do; n is as for Acquire.
func (s *Semaphore) Do(ctx context.Context, n int64, fn func(ctx context.Context) error) error {
	lease, err := s.Acquire(ctx, n)
	if err != nil {
		return err
	}
	return run(ctx, lease, fn)
}

func (s *Semaphore) acquire(ctx context.Context, n int64, try bool) (*Lease, error) {
	if s.t.Err() == nil && (n < 1 || n > s.size) {
		return nil, fmt.Errorf("dlock: semaphore %q: cannot take %d permits: ask for 1 to %d (its size)", s.t.Name(), n, s.size)
	}
	return handle(s.t.Acquire(ctx, n, try))
}
