package engine

import (
	"context"
	"hash/maphash"
	"sync"
)

// local is what this process holds and who waits for it: the state that the goroutines of
// one Client share, by lock key, in shards. Every Lock and Unlock takes its key's shard
// several times; with one Client-wide mutex, goroutines locking different keys queued on
// it (BENCHMARKS.md, the client CPU of an uncontended Lock+Unlock).
type local struct {
	seed   maphash.Seed
	shards [localShards]localShard
}

// localShards is how many shards a Client's local state has: enough that the goroutines
// of a busy process seldom share one, few enough that Close and live visit them at once.
const localShards = 64

// localShard is the local state of the lock keys that hash to it. mu guards every field,
// and the fields of the localQueues and localWaiters it holds.
type localShard struct {
	mu     sync.Mutex
	queues map[string]*localQueue // waiters and holds of this process, by lock key; made on first use
	spare  []*localQueue          // idle queues kept for reuse
	holds  map[*Hold]struct{}     // outer holds not yet ended, released by Close; made on first use
	closed bool                   // Close has begun: no hold is adopted any more
	_      [64]byte               // keeps neighbouring shards' mutexes off one cache line
}

func newLocal() local { return local{seed: maphash.MakeSeed()} }

// lock locks the shard of key and returns it: the caller unlocks its mu.
func (l *local) lock(key string) *localShard {
	s := &l.shards[maphash.String(l.seed, key)%localShards]
	s.mu.Lock()
	return s
}

// localQueue orders the goroutines of this process that wait for one lock key, first come
// first served. Only the head asks Redis; the others wait for their turn, so that any
// number of local waiters cost one request per release, not one each. Every field is
// guarded by the mu of its key's localShard.
type localQueue struct {
	waiters []*localWaiter // by arrival; waiters[0] is the head
	held    *Hold          // this process's live outer hold of the key, nil when none
	// changed is closed (and cleared) when held is cleared or handed to the head; it is
	// made when the head first waits on it, so an uncontended Lock makes none.
	changed chan struct{}
	// ask is this process's standing request for the key, nil when none: a Mutex's
	// (turns.go), kept here because every handle of the name in the process shares it.
	ask *mutexAsk
}

// localWaiter is one Lock call in a local queue; it lives in the call's request.
type localWaiter struct {
	ctx    context.Context // the waiter's Lock ctx: a hold handed to it keeps its values
	cfg    LockConfig      // the options of the handle it locked: a hold handed to it has them
	turn   chan struct{}   // closed when the waiter becomes the head
	queue  *localQueue     // the queue it joined
	handed *Hold           // guarded by its key's localShard.mu: the hold handed to it, until taken
}

// closedChan is the turn of a waiter that is the head as soon as it joins.
var closedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()

// enter counts a Lock call for key under way in inflight, unless Close has begun: Add
// happens under the key's shard's mu while its closed is false, so never after Close
// began to Wait (close marks every shard before it returns).
func (l *local) enter(key string, inflight *sync.WaitGroup) error {
	s := l.lock(key)
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	inflight.Add(1)
	return nil
}

// close marks the Client closed, every shard of it, and reports whether it was open.
// The first shard decides, so that of two Closes at once only one reports it open.
func (l *local) close() bool {
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		was := !s.closed
		s.closed = true
		s.mu.Unlock()
		if i == 0 && !was {
			return false
		}
	}
	return true
}

// live returns the outer holds not yet ended.
func (l *local) live() []*Hold {
	var holds []*Hold
	for i := range l.shards {
		s := &l.shards[i]
		s.mu.Lock()
		for h := range s.holds {
			holds = append(holds, h)
		}
		s.mu.Unlock()
	}
	return holds
}

// adopt records a new outer hold (a hold's start hook). It fails with ErrClosed if Close
// has begun, since Close would not release a hold it did not see.
func (l *local) adopt(h *Hold) error {
	s := l.lock(h.t.keys.Lock)
	defer s.mu.Unlock()
	if s.closed {
		return ErrClosed
	}
	s.holdLocked(h)
	if h.t.share.queues() {
		s.queueLocked(h.t.keys.Lock).held = h
	}
	return nil
}

// forget removes an ended hold (its end hook) and wakes the local head, which may now
// ask Redis.
func (l *local) forget(h *Hold) {
	s := l.lock(h.t.keys.Lock)
	defer s.mu.Unlock()
	delete(s.holds, h)
	q := s.queues[h.t.keys.Lock]
	if q == nil || q.held != h {
		return
	}
	q.held = nil
	q.notifyLocked()
	s.dropIfIdleLocked(h.t.keys.Lock, q)
}

// join appends w to the queue of key.
func (l *local) join(key string, ctx context.Context, cfg LockConfig, w *localWaiter) {
	s := l.lock(key)
	defer s.mu.Unlock()
	q := s.queueLocked(key)
	w.ctx, w.cfg, w.queue = ctx, cfg, q
	if len(q.waiters) == 0 {
		w.turn = closedChan
	} else {
		w.turn = make(chan struct{})
	}
	q.waiters = append(q.waiters, w)
}

// leave removes w and hands the turn to the next waiter if w was the head. It returns a
// hold handed to w that w did not take (it gave up meanwhile): the caller must end it;
// and, when w was the last waiter of a process with a standing request, the request,
// which the caller must withdraw.
func (l *local) leave(key string, w *localWaiter) (untaken *Hold, ask *mutexAsk) {
	s := l.lock(key)
	defer s.mu.Unlock()
	q := w.queue
	untaken, w.handed = w.handed, nil
	for i, x := range q.waiters {
		if x != w {
			continue
		}
		q.waiters = append(q.waiters[:i], q.waiters[i+1:]...)
		if i == 0 && len(q.waiters) > 0 {
			close(q.waiters[0].turn)
		}
		break
	}
	if len(q.waiters) == 0 && q.ask != nil {
		ask, q.ask = q.ask, nil
	}
	s.dropIfIdleLocked(key, q)
	return untaken, ask
}

// takeHandoff returns the hold handed to w, a waiter of key, if any; the caller now owns
// it.
func (l *local) takeHandoff(key string, w *localWaiter) *Hold {
	if w == nil {
		return nil
	}
	s := l.lock(key)
	defer s.mu.Unlock()
	h := w.handed
	w.handed = nil
	return h
}

// heldHere returns this process's live hold of key, or nil.
func (l *local) heldHere(key string) *Hold {
	s := l.lock(key)
	defer s.mu.Unlock()
	if q := s.queues[key]; q != nil {
		return q.held
	}
	return nil
}

// changed is sharing.changed for the waiter w of key. A hold handed to w since it last
// looked counts as a change: the channel is then closed already, so that the caller
// takes the hold rather than wait for its end.
func (l *local) changed(key string, w *localWaiter, always bool) <-chan struct{} {
	s := l.lock(key)
	defer s.mu.Unlock()
	if w != nil && w.handed != nil {
		return closedChan
	}
	q := s.queueLocked(key)
	if q.held == nil && !always {
		return nil
	}
	if q.changed == nil {
		q.changed = make(chan struct{})
	}
	return q.changed
}

// waiting returns how many goroutines wait in the local queue of key.
func (l *local) waiting(key string) int {
	s := l.lock(key)
	defer s.mu.Unlock()
	if q := s.queues[key]; q != nil {
		return len(q.waiters)
	}
	return 0
}

// maxSpareQueues bounds the idle queues a shard keeps for reuse.
const maxSpareQueues = 8

func (s *localShard) queueLocked(key string) *localQueue {
	q := s.queues[key]
	if q == nil {
		if n := len(s.spare); n > 0 {
			q, s.spare = s.spare[n-1], s.spare[:n-1]
		} else {
			q = &localQueue{}
		}
		if s.queues == nil {
			s.queues = make(map[string]*localQueue)
		}
		s.queues[key] = q
	}
	return q
}

func (s *localShard) holdLocked(h *Hold) {
	if s.holds == nil {
		s.holds = make(map[*Hold]struct{})
	}
	s.holds[h] = struct{}{}
}

func (s *localShard) dropIfIdleLocked(key string, q *localQueue) {
	if len(q.waiters) == 0 && q.held == nil && s.queues[key] == q {
		delete(s.queues, key)
		if q.changed == nil && q.ask == nil && len(s.spare) < maxSpareQueues {
			q.waiters = q.waiters[:0]
			s.spare = append(s.spare, q)
		}
	}
}

// behind is how many waiters are queued behind w (all of them if w is not queued).
func (q *localQueue) behind(w *localWaiter) int {
	if w != nil && len(q.waiters) > 0 && q.waiters[0] == w {
		return len(q.waiters) - 1
	}
	return len(q.waiters)
}

// notifyLocked wakes whoever waits on q.changed.
func (q *localQueue) notifyLocked() {
	if q.changed != nil {
		close(q.changed)
		q.changed = nil
	}
}
