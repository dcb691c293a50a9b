package renew

import (
	"math/rand/v2"
	"sync"
	"testing"
	"time"
)

// The scheduler goroutine is woken only for an entry whose next event comes before the
// instant its timer is armed for (armed). These tests move an entry's event earlier than
// armed through every path that can, with an anchor entry due much later so that the
// timer alone would fire far too late, and check the event still happens on time.

// lateness bounds how late an event may be from scheduling noise alone; the timer armed
// for the anchor would fire an hour later.
const lateness = 2 * time.Second

// onTime fails unless e expired at or after deadline and within lateness of it.
func onTime(t *testing.T, r *recorder, e *Entry, deadline time.Time) {
	t.Helper()
	r.mu.Lock()
	at, ok := r.expired[e]
	r.mu.Unlock()
	switch {
	case !ok:
		t.Fatalf("%v never expired", e.Value)
	case at.Before(deadline):
		t.Fatalf("%v expired %v before its deadline", e.Value, deadline.Sub(at))
	case at.Sub(deadline) > lateness:
		t.Fatalf("%v expired %v after its deadline", e.Value, at.Sub(deadline))
	}
}

// anchored returns a started scheduler whose goroutine has armed its timer for an entry
// due in an hour.
func anchored(t *testing.T) (*recorder, *Scheduler) {
	t.Helper()
	r := newRecorder()
	s := New(r.renew, r.expire)
	s.Add(&Entry{Value: "anchor"}, time.Time{}, 0, time.Now().Add(time.Hour))
	armedAt(t, s)
	return r, s
}

// TestDeadlineSoonerThanArmed: an entry's deadline moved before the instant the
// goroutine's timer is armed for, by Shorten (the entry idle, or its renewal in flight, when
// its event is its deadline and the renewal never reports back) or by adding the entry
// again, still expires the entry at its new deadline.
func TestDeadlineSoonerThanArmed(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		inFlight bool
		sooner   func(s *Scheduler, e *Entry, deadline time.Time)
	}{
		{"Shorten", false, func(s *Scheduler, e *Entry, d time.Time) { s.Shorten(e, d) }},
		{"Shorten, renewal in flight", true, func(s *Scheduler, e *Entry, d time.Time) { s.Shorten(e, d) }},
		{"Add again", false, func(s *Scheduler, e *Entry, d time.Time) { s.Add(e, time.Time{}, 0, d) }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, s := anchored(t)
			release := make(chan struct{})
			r.set(func([]*Entry) { <-release })
			defer s.Stop()
			defer close(release)
			e := &Entry{Value: "e"}
			if tc.inFlight {
				s.Add(e, time.Now().Add(20*time.Millisecond), 0, time.Now().Add(2*time.Hour))
				recv(t, r.renewed, 10*time.Second, "renewal")
			} else {
				s.Add(e, time.Time{}, 0, time.Now().Add(2*time.Hour)) // after the anchor: no wake
			}
			deadline := time.Now().Add(100 * time.Millisecond)
			tc.sooner(s, e, deadline)
			if got := recv(t, r.expires, 10*time.Second, "expiry at the new deadline"); got != e {
				t.Fatalf("expired %v, want e", got.Value)
			}
			onTime(t, r, e, deadline)
		})
	}
}

// TestRenewedSoonerThanArmed: Renewed (an Extend) gives an idle entry a renewal before the
// armed instant; it is sent when due.
func TestRenewedSoonerThanArmed(t *testing.T) {
	t.Parallel()
	r, s := anchored(t)
	defer s.Stop()
	e := &Entry{Value: "e"}
	s.Add(e, time.Time{}, 0, time.Now().Add(2*time.Hour))
	renewAt := time.Now().Add(100 * time.Millisecond)
	s.Renewed(e, renewAt, time.Now().Add(3*time.Hour))
	recv(t, r.renewed, 10*time.Second, "renewal")
	if late := time.Since(renewAt); late < 0 || late > lateness {
		t.Fatalf("renewal sent %v after it was due", late)
	}
}

// TestAddFromExpire: an entry added by the expire callback runs on the scheduler goroutine
// after it has armed its next instant and before its timer is reset; it is looked at on
// time whether it is due before or after that instant.
func TestAddFromExpire(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	var s *Scheduler
	var mu sync.Mutex
	added := map[*Entry]time.Time{}
	first := &Entry{Value: "first"}
	s = New(r.renew, func(e *Entry) {
		r.expire(e)
		if e != first {
			return
		}
		now := time.Now()
		for i, d := range []time.Duration{100, 300} {
			next := &Entry{Value: []string{"sooner", "later"}[i]}
			mu.Lock()
			added[next] = now.Add(d * time.Millisecond)
			mu.Unlock()
			s.Add(next, time.Time{}, 0, now.Add(d*time.Millisecond))
		}
	})
	defer s.Stop()
	now := time.Now()
	s.Add(first, time.Time{}, 0, now.Add(30*time.Millisecond))
	s.Add(&Entry{Value: "between"}, time.Time{}, 0, now.Add(200*time.Millisecond))
	s.Add(&Entry{Value: "anchor"}, time.Time{}, 0, now.Add(time.Hour))
	for range 4 {
		recv(t, r.expires, 10*time.Second, "expiry")
	}
	mu.Lock()
	defer mu.Unlock()
	for e, deadline := range added {
		onTime(t, r, e, deadline)
	}
}

// TestConcurrentCallersOnTime: several goroutines add, shorten, re-add and remove entries
// while the scheduler expires others, so that calls land between a tick's unlock and its
// timer's reset, and around every armed instant. Every entry not removed expires at its
// last deadline, none early and none late. Half the deadlines carry no monotonic reading.
func TestConcurrentCallersOnTime(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	r.expires = make(chan *Entry, 1<<14)
	s := New(r.renew, r.expire)
	defer s.Stop()
	s.Add(&Entry{Value: "anchor"}, time.Time{}, 0, time.Now().Add(time.Hour))

	type want struct {
		deadline time.Time
		removed  bool
	}
	var mu sync.Mutex
	wants := map[*Entry]*want{}
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(g), 7))
			for i := range 150 {
				e := &Entry{Value: "e"}
				d := time.Now().Add(time.Duration(20+rng.IntN(400)) * time.Millisecond)
				if i%2 == 1 {
					d = d.Round(0)
				}
				mu.Lock()
				w := &want{deadline: d}
				wants[e] = w
				mu.Unlock()
				switch rng.IntN(4) {
				case 0:
					s.Add(e, time.Time{}, 0, d)
				case 1: // later, then shortened
					s.Add(e, time.Time{}, 0, d.Add(time.Hour))
					s.Shorten(e, d)
				case 2: // later, then added again sooner
					s.Add(e, time.Time{}, 0, d.Add(time.Hour))
					s.Add(e, time.Time{}, 0, d)
				case 3: // removed before its deadline
					s.Add(e, time.Time{}, 0, d.Add(time.Second))
					mu.Lock()
					s.Remove(e)
					w.removed = true
					mu.Unlock()
				}
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
			}
		})
	}
	wg.Wait()
	time.Sleep(420*time.Millisecond + lateness)
	mu.Lock()
	defer mu.Unlock()
	r.mu.Lock()
	defer r.mu.Unlock()
	var late, early, missing, wrong int
	var worst time.Duration
	for e, w := range wants {
		at, ok := r.expired[e]
		switch {
		case w.removed && ok:
			wrong++
		case w.removed:
		case !ok:
			missing++
		case at.Before(w.deadline):
			early++
		case at.Sub(w.deadline) > lateness:
			late++
			worst = max(worst, at.Sub(w.deadline))
		}
	}
	if late+early+missing+wrong > 0 {
		t.Fatalf("of %d entries: %d late (worst %v), %d early, %d never expired, %d expired after Remove",
			len(wants), late, worst, early, missing, wrong)
	}
}
