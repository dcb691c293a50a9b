// Package renew keeps leases alive. One Scheduler per Client renews every lease it holds
// from a single goroutine: leases that fall due together are handed over in one batch, so
// that renewal costs one round trip per node per tick, not one goroutine or timer per lease.
// The same goroutine ends a lease whose deadline passes, whether or not Redis answers.
package renew

import (
	"container/heap"
	"sync"
	"time"
)

// Entry is one lease as the scheduler sees it. Its fields are guarded by the scheduler.
type Entry struct {
	Value any // the caller's lease; the scheduler never looks at it

	renewAt  time.Time     // next renewal; zero for a lease that is not renewed
	slack    time.Duration // how early the lease may be renewed to join a batch
	deadline time.Time     // the lease is lost at this instant unless renewed before
	inFlight bool          // a renewal was handed out and has not reported back
	index    int           // position in the heap, -1 when not scheduled
}

// event is when the scheduler must next look at e.
func (e *Entry) event() time.Time {
	if e.renewAt.IsZero() || e.inFlight || e.deadline.Before(e.renewAt) {
		return e.deadline
	}
	return e.renewAt
}

// Scheduler runs renewals and expiries. Its methods are safe for concurrent use.
type Scheduler struct {
	renew  func(batch []*Entry) // runs on a goroutine of its own per batch; reports via Renewed or Retry
	expire func(e *Entry)       // runs on the scheduler goroutine; must not block

	mu       sync.Mutex
	entries  entryHeap     // guarded by mu
	maxSlack time.Duration // guarded by mu: the largest slack of any entry added
	started  bool          // guarded by mu
	stopped  bool          // guarded by mu
	// armed is guarded by mu: when the goroutine looks at the heap next unless woken (the
	// earliest event when it last looked), zero for not before a wake. Every entry's event
	// is at or after it, or a wake is pending: an entry is added or moved with a wake only
	// when its event comes sooner (poke), so that the usual Add, a lease due after every
	// other, costs no wake-up of the goroutine. An entry removed may leave it early: the
	// goroutine then looks, finds nothing due and looks again at the new earliest event.
	armed time.Time

	wake chan struct{} // capacity 1: the earliest event changed
	stop chan struct{}
	wg   sync.WaitGroup
}

// New returns a scheduler. It starts its goroutine with the first Add.
func New(renew func(batch []*Entry), expire func(e *Entry)) *Scheduler {
	return &Scheduler{renew: renew, expire: expire, wake: make(chan struct{}, 1), stop: make(chan struct{})}
}

// Add schedules e: renewal at renewAt (zero for none), within slack before it if that lets
// it share a batch, and expiry at deadline. It reports false after Stop.
func (s *Scheduler) Add(e *Entry, renewAt time.Time, slack time.Duration, deadline time.Time) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopped {
		return false
	}
	e.renewAt, e.slack, e.deadline, e.inFlight = renewAt, slack, deadline, false
	s.maxSlack = max(s.maxSlack, slack)
	if s.scheduled(e) {
		heap.Fix(&s.entries, e.index) // added again: reschedule, never schedule twice
	} else {
		heap.Push(&s.entries, e)
	}
	if !s.started {
		s.started = true
		s.wg.Add(1)
		go s.run()
	}
	s.poke(e)
	return true
}

// Remove unschedules e. It is a no-op for an entry that is not scheduled.
func (s *Scheduler) Remove(e *Entry) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.scheduled(e) {
		heap.Remove(&s.entries, e.index)
	}
}

// scheduled reports whether e is in the heap. The index alone does not say: a zero Entry
// has index 0, and Stop drops the heap without resetting the indexes.
func (s *Scheduler) scheduled(e *Entry) bool {
	return e.index >= 0 && e.index < len(s.entries) && s.entries[e.index] == e
}

// Renewed records a successful renewal (or Extend): the new deadline and the next renewal.
func (s *Scheduler) Renewed(e *Entry, renewAt, deadline time.Time) {
	s.update(e, func() { e.renewAt, e.deadline, e.inFlight = renewAt, deadline, false })
}

// Shorten moves e's deadline earlier; a later deadline is ignored.
func (s *Scheduler) Shorten(e *Entry, deadline time.Time) {
	s.update(e, func() {
		if deadline.Before(e.deadline) {
			e.deadline = deadline
		}
	})
}

// Retry records a failed renewal; the next attempt is at `at`, the deadline is unchanged.
func (s *Scheduler) Retry(e *Entry, at time.Time) {
	s.update(e, func() { e.renewAt, e.inFlight = at, false })
}

func (s *Scheduler) update(e *Entry, change func()) {
	s.mu.Lock()
	defer s.mu.Unlock()
	change()
	if s.scheduled(e) {
		heap.Fix(&s.entries, e.index)
		s.poke(e)
	}
}

// Deadline reports e's current deadline.
func (s *Scheduler) Deadline(e *Entry) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	return e.deadline
}

// Len is the number of scheduled entries.
func (s *Scheduler) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.entries)
}

// Stop ends the scheduler goroutine and waits for renewals in flight to report back. The
// entries still scheduled are dropped without being expired.
func (s *Scheduler) Stop() {
	s.mu.Lock()
	if !s.stopped {
		s.stopped = true
		close(s.stop)
	}
	s.entries = nil
	s.mu.Unlock()
	s.wg.Wait()
}

// poke wakes the goroutine if it must look at e before it would otherwise (see armed).
// s.mu is held.
func (s *Scheduler) poke(e *Entry) {
	if !s.armed.IsZero() && !e.event().Before(s.armed) {
		return
	}
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

func (s *Scheduler) run() {
	defer s.wg.Done()
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := s.tick(time.Now())
		if next.IsZero() {
			timer.Reset(time.Hour)
		} else {
			timer.Reset(time.Until(next))
		}
		select {
		case <-timer.C:
		case <-s.wake:
		case <-s.stop:
			return
		}
	}
}

// tick expires the entries past their deadline, hands out the renewals that are due (with
// those close enough to join them) and returns when the next event is due.
func (s *Scheduler) tick(now time.Time) time.Time {
	var expired, due, later []*Entry
	s.mu.Lock()
	horizon := now.Add(s.maxSlack)
	for len(s.entries) > 0 {
		e := s.entries[0]
		if e.event().After(horizon) {
			break
		}
		heap.Pop(&s.entries)
		switch {
		case !e.deadline.After(now):
			expired = append(expired, e)
		case !e.inFlight && !e.renewAt.IsZero() && !e.renewAt.After(now.Add(e.slack)):
			e.inFlight = true
			due = append(due, e)
			later = append(later, e)
		default:
			later = append(later, e)
		}
	}
	// A batch is only worth sending when at least one entry is really due, not just near.
	if len(due) > 0 && !anyDue(due, now) {
		for _, e := range due {
			e.inFlight = false
		}
		due = nil
	}
	for _, e := range later {
		heap.Push(&s.entries, e)
	}
	var next time.Time
	if len(s.entries) > 0 {
		next = s.entries[0].event()
	}
	s.armed = next
	if len(due) > 0 {
		s.wg.Add(1)
	}
	s.mu.Unlock()

	for _, e := range expired {
		s.expire(e)
	}
	if len(due) > 0 {
		go func() {
			defer s.wg.Done()
			s.renew(due)
		}()
	}
	return next
}

func anyDue(entries []*Entry, now time.Time) bool {
	for _, e := range entries {
		if !e.renewAt.After(now) {
			return true
		}
	}
	return false
}

// entryHeap orders entries by their next event.
type entryHeap []*Entry

func (h entryHeap) Len() int           { return len(h) }
func (h entryHeap) Less(i, j int) bool { return h[i].event().Before(h[j].event()) }
func (h entryHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *entryHeap) Push(x any) {
	e := x.(*Entry)
	e.index = len(*h)
	*h = append(*h, e)
}
func (h *entryHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	old[len(old)-1] = nil
	e.index = -1
	*h = old[:len(old)-1]
	return e
}
