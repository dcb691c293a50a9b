package engine

import (
	"context"
	"fmt"
	"strconv"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// NewSemaphore returns the engine of the Semaphore called name with size permits; cfgErr
// is an invalid option. A size below 1 is reported by every method.
func NewSemaphore(c *Client, name string, size int64, cfg LockConfig, cfgErr error) *Target {
	t := newTarget(c, name, cfg, cfgErr, func(*Target) scheme { return &semaphoreScheme{size: size} })
	if t.err == nil && size < 1 {
		t.err = fmt.Errorf("dlock: semaphore %q: size %d: a semaphore needs at least 1 permit", name, size)
	}
	return t
}

// semaphoreScheme: holders in a sorted set with their lease ends, their permits in a hash,
// and a queue of waiters like the FairMutex's.
type semaphoreScheme struct {
	plain
	size int64
}

func (*semaphoreScheme) kind() string { return KindSemaphore }

func semKeys(t *Target) (holders, permits string) {
	return t.keys.Lock, t.keys.Permits()
}

func (s *semaphoreScheme) acquire(t *Target, r *request, a *ticket, call *batch.Call) {
	holders, permits := semKeys(t)
	call.Script = scripts.SemaphoreAcquire
	call.Keys = []string{holders, t.keys.Fence, permits, t.keys.Queue(), t.keys.QueueDeadlines(), t.keys.Gone}
	call.Args = []any{
		a.token, t.ttlArg, strconv.FormatInt(s.size, 10), strconv.FormatInt(r.n, 10),
		// On a quorum, waiters do not queue: each node would keep its own order, and a
		// waiter first on some nodes but not on enough of them would wait forever.
		r.waiter, waiterTTLArg, flagArg(r.try || len(t.c.nodes) > 1), t.keys.Channel, t.c.nodes[call.Node].PublishCommand(),
	}
}

func (*semaphoreScheme) release(t *Target, token any, publish string, call *batch.Call) {
	holders, permits := semKeys(t)
	call.Script = scripts.MemberRelease
	call.Keys = []string{holders, permits}
	call.Args = []any{token, t.keys.Channel, publish}
}

func (*semaphoreScheme) extend(t *Target, token any, ttl string, call *batch.Call) {
	holders, permits := semKeys(t)
	call.Script = scripts.MemberExtend
	call.Keys = []string{holders, permits, t.keys.Gone}
	call.Args = []any{token, ttl}
}

func (*semaphoreScheme) leave(t *Target, r *request, call *batch.Call) bool {
	call.Script = scripts.WaiterLeave
	call.Keys = []string{t.keys.QueueDeadlines(), t.keys.Queue()}
	call.Args = []any{r.waiter, t.keys.Channel, t.c.nodes[call.Node].PublishCommand()}
	return true
}

// need is the smallest q with (size+1)*q > size*n: size+1 holders cannot each find room on
// q of n nodes whose capacity is size each.
func (s *semaphoreScheme) need(n int) int {
	if s.size >= int64(n) {
		return n
	}
	return int(s.size*int64(n)/(s.size+1)) + 1
}

func (*semaphoreScheme) channels(t *Target, _ *request, n *Node) []notify.Channel {
	return []notify.Channel{n.releaseChannel(t.keys.Channel)}
}

func (*semaphoreScheme) policy() policy { return policy{waitList: true} }

// exclusive: a permit shares its key.
func (*semaphoreScheme) exclusive(*Target) []string { return nil }

// waitsFor: a Semaphore finds the key of another kind of another type, and fails at once.
func (*semaphoreScheme) waitsFor(*Hold) bool { return false }

// selfWait: a Semaphore is not re-entrant, so the permits the leases ctx carries hold
// must leave room for r's.
func (s *semaphoreScheme) selfWait(ctx context.Context, r *request) error {
	t := r.t
	var held int64
	for h := range liveHolds(ctx, t.c) {
		if h.t.scheme.kind() == KindSemaphore && h.t.keys.Lock == t.keys.Lock {
			held += h.permits
		}
	}
	if held+r.n > s.size {
		return fmt.Errorf("dlock: semaphore %q: ctx carries live leases of this Client on %d of its %d permits, and this Acquire of %d would wait for itself: unlock them first, or acquire with a context that does not carry them",
			t.name, held, s.size, r.n)
	}
	return nil
}
