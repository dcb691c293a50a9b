package dlock

import (
	"context"
	"fmt"
	"strconv"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/scripts"
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
	t    *target
	size int64
}

// Semaphore returns the semaphore called name with size permits. A size below 1 is
// reported by every method.
func (c *Client) Semaphore(name string, size int64, opts ...LockOption) *Semaphore {
	s := &Semaphore{size: size}
	s.t = newTarget(c, semaphoreScheme{size: size}, name, opts)
	if s.t.err == nil && size < 1 {
		s.t.err = fmt.Errorf("dlock: semaphore %q: size %d: a semaphore needs at least 1 permit", name, size)
	}
	return s
}

// Acquire takes n permits, waiting in order until they are free or ctx is done. The lease
// holds all n; Unlock returns them. n must be between 1 and the size.
func (s *Semaphore) Acquire(ctx context.Context, n int64) (*Lease, error) {
	return s.acquire(ctx, &request{n: n})
}

// TryAcquire takes n permits only if they are free now and no one waits; it never waits.
func (s *Semaphore) TryAcquire(ctx context.Context, n int64) (*Lease, error) {
	return s.acquire(ctx, &request{n: n, try: true})
}

func (s *Semaphore) acquire(ctx context.Context, r *request) (*Lease, error) {
	if s.t.err == nil && (r.n < 1 || r.n > s.size) {
		return nil, fmt.Errorf("dlock: semaphore %q: cannot take %d permits: ask for 1 to %d (its size)", s.t.name, r.n, s.size)
	}
	return s.t.lock(ctx, r)
}

// semaphoreScheme: holders in a sorted set with their lease ends, their permits in a hash,
// and a queue of waiters like the FairMutex's.
type semaphoreScheme struct {
	size int64
}

func (semaphoreScheme) kind() string { return "semaphore" }

func semKeys(t *target) (holders, permits string) {
	return t.keys.Lock, t.keys.Permits()
}

func (s semaphoreScheme) acquire(t *target, r *request, token any, call *batch.Call) {
	holders, permits := semKeys(t)
	call.Script = scripts.SemaphoreAcquire
	call.Keys = []string{holders, t.keys.Fence, permits, t.keys.Queue(), t.keys.QueueDeadlines()}
	call.Args = []any{
		token, t.ttlArg, strconv.FormatInt(s.size, 10), strconv.FormatInt(r.n, 10),
		// On a quorum, waiters do not queue: each node would keep its own order, and a
		// waiter first on some nodes but not on enough of them would wait forever.
		r.waiter, waiterTTLArg, flagArg(r.try || len(t.c.nodes) > 1), t.keys.Channel, t.c.nodes[call.Node].publishCommand(),
	}
}

func (semaphoreScheme) release(t *target, token any, publish string, call *batch.Call) {
	holders, permits := semKeys(t)
	call.Script = scripts.MemberRelease
	call.Keys = []string{holders, permits}
	call.Args = []any{token, t.keys.Channel, publish}
}

func (semaphoreScheme) extend(t *target, token any, ttl string, set bool, call *batch.Call) {
	holders, permits := semKeys(t)
	call.Script = scripts.MemberExtend
	call.Keys = []string{holders, permits}
	call.Args = []any{token, ttl, extendMode(set)}
}

func (semaphoreScheme) leave(t *target, r *request, call *batch.Call) bool {
	call.Script = scripts.WaiterLeave
	call.Keys = []string{t.keys.QueueDeadlines(), t.keys.Queue()}
	call.Args = []any{r.waiter, t.keys.Channel, t.c.nodes[call.Node].publishCommand()}
	return true
}

// need is the smallest q with (size+1)*q > size*n: size+1 holders cannot each find room on
// q of n nodes whose capacity is size each.
func (s semaphoreScheme) need(n int) int {
	if s.size >= int64(n) {
		return n
	}
	return int(s.size*int64(n)/(s.size+1)) + 1
}

func (semaphoreScheme) channels(t *target, _ *request, n *node) []notify.Channel {
	return []notify.Channel{releaseChannel(t, n)}
}

func (semaphoreScheme) policy() policy { return policy{waitList: true} }
