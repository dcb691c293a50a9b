package renew

import (
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// recorder is a pair of fake callbacks: renew hands each batch to onRenew (if set) after
// recording it, expire records the entry and when it expired.
type recorder struct {
	mu      sync.Mutex
	batches [][]*Entry
	expired map[*Entry]time.Time
	onRenew func(batch []*Entry)

	renewed chan []*Entry // gets each batch, if not nil (must have room)
	expires chan *Entry   // gets each expired entry, if not nil (must have room)
}

func newRecorder() *recorder {
	return &recorder{
		expired: map[*Entry]time.Time{},
		renewed: make(chan []*Entry, 1024),
		expires: make(chan *Entry, 1024),
	}
}

func (r *recorder) renew(batch []*Entry) {
	r.mu.Lock()
	r.batches = append(r.batches, slices.Clone(batch))
	on := r.onRenew
	r.mu.Unlock()
	r.renewed <- batch
	if on != nil {
		on(batch)
	}
}

func (r *recorder) expire(e *Entry) {
	r.mu.Lock()
	r.expired[e] = time.Now()
	r.mu.Unlock()
	r.expires <- e
}

func (r *recorder) set(on func(batch []*Entry)) {
	r.mu.Lock()
	r.onRenew = on
	r.mu.Unlock()
}

func recv[T any](t *testing.T, c <-chan T, within time.Duration, what string) T {
	t.Helper()
	select {
	case v := <-c:
		return v
	case <-time.After(within):
		t.Fatalf("no %s within %v", what, within)
		var zero T
		return zero
	}
}

func none[T any](t *testing.T, c <-chan T, for_ time.Duration, what string) {
	t.Helper()
	if for_ == 0 {
		select {
		case v := <-c:
			t.Fatalf("unexpected %s: %v", what, v)
		default:
		}
		return
	}
	select {
	case v := <-c:
		t.Fatalf("unexpected %s: %v", what, v)
	case <-time.After(for_):
	}
}

func names(batch []*Entry) []string {
	var out []string
	for _, e := range batch {
		out = append(out, e.Value.(string))
	}
	slices.Sort(out)
	return out
}

func TestBatchWithSlack(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	s := New(r.renew, r.expire)
	defer s.Stop()

	now := time.Now()
	far := now.Add(time.Hour)
	a, b, c := &Entry{Value: "a"}, &Entry{Value: "b"}, &Entry{Value: "c"}
	// b is due 100ms after a, within its 200ms slack: it joins a's batch. c is due 2s later.
	s.Add(c, now.Add(2*time.Second), 200*time.Millisecond, far)
	s.Add(b, now.Add(150*time.Millisecond), 200*time.Millisecond, far)
	s.Add(a, now.Add(50*time.Millisecond), 200*time.Millisecond, far)

	first := recv(t, r.renewed, 10*time.Second, "first batch")
	if at := time.Now(); at.Before(now.Add(50 * time.Millisecond)) {
		t.Fatalf("the batch went out %v before any entry was due", now.Add(50*time.Millisecond).Sub(at))
	}
	if got := names(first); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("first batch %v, want [a b]", got)
	}
	second := recv(t, r.renewed, 10*time.Second, "second batch")
	if got := names(second); !slices.Equal(got, []string{"c"}) {
		t.Fatalf("second batch %v, want [c]", got)
	}
	if at := time.Now(); at.Before(now.Add(2 * time.Second).Add(-200 * time.Millisecond)) {
		t.Fatalf("c went out %v before its slack window", now.Add(1800*time.Millisecond).Sub(at))
	}
	if s.Len() != 3 {
		t.Fatalf("Len = %d, want 3 (renewals in flight stay scheduled for their deadline)", s.Len())
	}
	none(t, r.renewed, 100*time.Millisecond, "batch while every renewal is in flight")
}

// TestSlackAloneDoesNotSend: an entry inside its slack window but not yet due is not sent on
// its own; it waits until it is due.
func TestSlackAloneDoesNotSend(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	s := New(r.renew, r.expire)
	defer s.Stop()
	start := time.Now()
	due := start.Add(300 * time.Millisecond)
	s.Add(&Entry{Value: "a"}, due, time.Second, start.Add(time.Hour))
	batch := recv(t, r.renewed, 10*time.Second, "batch")
	if now := time.Now(); now.Before(due) {
		t.Fatalf("renewed %v before it was due, only because it was within its slack", due.Sub(now))
	}
	if len(batch) != 1 {
		t.Fatalf("batch of %d", len(batch))
	}
}

// TestExpiryDespiteHungRenewal: the renewal never reports back; the entry expires at its
// deadline all the same, and a late report changes nothing.
func TestExpiryDespiteHungRenewal(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	s := New(r.renew, r.expire)
	release := make(chan struct{})
	r.set(func([]*Entry) { <-release })
	defer s.Stop()
	defer close(release)

	start := time.Now()
	deadline := start.Add(300 * time.Millisecond)
	e := &Entry{Value: "hung"}
	s.Add(e, start.Add(20*time.Millisecond), 10*time.Millisecond, deadline)
	recv(t, r.renewed, 10*time.Second, "renewal")
	got := recv(t, r.expires, 10*time.Second, "expiry")
	if got != e {
		t.Fatalf("expired %v", got.Value)
	}
	r.mu.Lock()
	at := r.expired[e]
	r.mu.Unlock()
	if at.Before(deadline) {
		t.Fatalf("expired %v before its deadline", deadline.Sub(at))
	}
	if s.Len() != 0 {
		t.Fatalf("Len = %d after expiry", s.Len())
	}
	// The hung renewal reports success late: the entry stays expired.
	s.Renewed(e, time.Now().Add(10*time.Millisecond), time.Now().Add(time.Hour))
	if s.Len() != 0 {
		t.Fatal("a late Renewed rescheduled an expired entry")
	}
	none(t, r.renewed, 100*time.Millisecond, "renewal of an expired entry")
	none(t, r.expires, 0, "second expiry")
}

// TestExpiryWhileAnotherBatchHangs: one hung batch does not hold up the renewals or expiry
// of other entries.
func TestExpiryWhileAnotherBatchHangs(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	s := New(r.renew, r.expire)
	release := make(chan struct{})
	r.set(func(batch []*Entry) {
		if batch[0].Value == "hung" {
			<-release
		}
	})
	defer s.Stop()
	defer close(release)
	now := time.Now()
	s.Add(&Entry{Value: "hung"}, now, 0, now.Add(time.Hour))
	recv(t, r.renewed, 10*time.Second, "hung renewal")
	other := &Entry{Value: "other"}
	s.Add(other, now.Add(50*time.Millisecond), 0, now.Add(500*time.Millisecond))
	if got := recv(t, r.renewed, 10*time.Second, "second renewal"); got[0] != other {
		t.Fatalf("renewed %v", names(got))
	}
	if got := recv(t, r.expires, 10*time.Second, "expiry"); got != other {
		t.Fatalf("expired %v", got.Value)
	}
}

func TestNoRenewEntryExpires(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	s := New(r.renew, r.expire)
	defer s.Stop()
	deadline := time.Now().Add(100 * time.Millisecond)
	e := &Entry{Value: "norenew"}
	s.Add(e, time.Time{}, 0, deadline)
	if got := recv(t, r.expires, 10*time.Second, "expiry"); got != e {
		t.Fatalf("expired %v", got.Value)
	}
	if time.Now().Before(deadline) {
		t.Fatal("expired before the deadline")
	}
	none(t, r.renewed, 0, "renewal of a NoRenew entry")
}

// TestRetry: a failed renewal is tried again at the given time; the deadline stays.
func TestRetry(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	s := New(r.renew, r.expire)
	defer s.Stop()
	var attempts atomic.Int32
	var retryAt time.Time
	var mu sync.Mutex
	r.set(func(batch []*Entry) {
		for _, e := range batch {
			if attempts.Add(1) < 3 {
				mu.Lock()
				retryAt = time.Now().Add(30 * time.Millisecond)
				at := retryAt
				mu.Unlock()
				s.Retry(e, at)
				continue
			}
			s.Renewed(e, time.Time{}, time.Now().Add(200*time.Millisecond))
		}
	})
	start := time.Now()
	e := &Entry{Value: "flaky"}
	s.Add(e, start.Add(10*time.Millisecond), 0, start.Add(time.Hour))
	recv(t, r.renewed, 10*time.Second, "first attempt")
	recv(t, r.renewed, 10*time.Second, "second attempt")
	recv(t, r.renewed, 10*time.Second, "third attempt")
	mu.Lock()
	at := retryAt // set by the second attempt, which returned before the third began
	mu.Unlock()
	if now := time.Now(); now.Before(at) {
		t.Fatalf("retried %v before the requested time", at.Sub(now))
	}
	// The third attempt succeeded and set a deadline 200ms out, without further renewal.
	if got := recv(t, r.expires, 10*time.Second, "expiry"); got != e {
		t.Fatalf("expired %v", got.Value)
	}
	if n := attempts.Load(); n != 3 {
		t.Fatalf("%d attempts, want 3", n)
	}
}

// TestRetryKeepsDeadline: retries that keep failing end at the original deadline.
func TestRetryKeepsDeadline(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	s := New(r.renew, r.expire)
	defer s.Stop()
	r.set(func(batch []*Entry) {
		for _, e := range batch {
			s.Retry(e, time.Now().Add(20*time.Millisecond))
		}
	})
	start := time.Now()
	deadline := start.Add(300 * time.Millisecond)
	e := &Entry{Value: "failing"}
	s.Add(e, start, 0, deadline)
	recv(t, r.expires, 10*time.Second, "expiry")
	if now := time.Now(); now.Before(deadline) {
		t.Fatalf("expired %v early", deadline.Sub(now))
	}
	if got := s.Deadline(e); !got.Equal(deadline) {
		t.Fatalf("Deadline = %v, want %v", got, deadline)
	}
	if n := len(r.renewed); n < 2 {
		t.Fatalf("%d attempts in 300ms with retries every 20ms", n)
	}
}

// TestRenewedMovesDeadline: a renewal that reports a later deadline postpones the expiry.
func TestRenewedMovesDeadline(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	s := New(r.renew, r.expire)
	defer s.Stop()
	var newDeadline atomic.Pointer[time.Time]
	r.set(func(batch []*Entry) {
		d := time.Now().Add(500 * time.Millisecond)
		newDeadline.Store(&d)
		s.Renewed(batch[0], time.Time{}, d)
	})
	start := time.Now()
	first := start.Add(100 * time.Millisecond)
	e := &Entry{Value: "e"}
	s.Add(e, start.Add(10*time.Millisecond), 0, first)
	recv(t, r.renewed, 10*time.Second, "renewal")
	recv(t, r.expires, 10*time.Second, "expiry")
	d := *newDeadline.Load()
	if now := time.Now(); now.Before(d) {
		t.Fatalf("expired %v before the renewed deadline (the first deadline was %v)", d.Sub(now), first)
	}
	if got := s.Deadline(e); !got.Equal(d) {
		t.Fatalf("Deadline = %v, want %v", got, d)
	}

	// Renewed from outside a renewal (Lease.Extend) on an idle entry works the same way.
	e2 := &Entry{Value: "e2"}
	s.Add(e2, time.Time{}, 0, time.Now().Add(100*time.Millisecond))
	later := time.Now().Add(400 * time.Millisecond)
	s.Renewed(e2, time.Time{}, later)
	recv(t, r.expires, 10*time.Second, "expiry of e2")
	if time.Now().Before(later) {
		t.Fatal("e2 expired at its old deadline")
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	s := New(r.renew, r.expire)
	defer s.Stop()
	now := time.Now()
	a, b, c := &Entry{Value: "a"}, &Entry{Value: "b"}, &Entry{Value: "c"}
	s.Add(a, now.Add(50*time.Millisecond), 0, now.Add(100*time.Millisecond))
	s.Add(b, now.Add(50*time.Millisecond), 0, now.Add(100*time.Millisecond))
	s.Add(c, time.Time{}, 0, now.Add(time.Hour))
	s.Remove(a)
	s.Remove(a) // idempotent
	s.Remove(&Entry{Value: "never added"})
	var zero Entry // index 0, like the heap's first element
	s.Remove(&zero)
	if s.Len() != 2 {
		t.Fatalf("Len = %d, want 2", s.Len())
	}
	got := recv(t, r.renewed, 10*time.Second, "renewal")
	if n := names(got); !slices.Equal(n, []string{"b"}) {
		t.Fatalf("renewed %v, want [b]", n)
	}
	if e := recv(t, r.expires, 10*time.Second, "expiry"); e != b {
		t.Fatalf("expired %v, want b", e.Value)
	}
	none(t, r.expires, 100*time.Millisecond, "expiry of a removed entry")
	s.Remove(b) // already expired
	s.Remove(c)
	if s.Len() != 0 {
		t.Fatalf("Len = %d, want 0", s.Len())
	}
	// Renewed and Retry on removed entries do nothing.
	s.Renewed(a, time.Now(), time.Now().Add(time.Millisecond))
	s.Retry(c, time.Now())
	none(t, r.renewed, 50*time.Millisecond, "renewal of a removed entry")
	if s.Len() != 0 {
		t.Fatalf("Len = %d, want 0", s.Len())
	}
}

// TestRemoveDuringRenewal: an entry removed while its renewal is in flight (Unlock during a
// renewal) is neither rescheduled by the late report nor expired.
func TestRemoveDuringRenewal(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	s := New(r.renew, r.expire)
	defer s.Stop()
	release := make(chan struct{})
	r.set(func(batch []*Entry) {
		<-release
		for _, e := range batch {
			s.Renewed(e, time.Now(), time.Now().Add(50*time.Millisecond))
		}
	})
	now := time.Now()
	e := &Entry{Value: "e"}
	s.Add(e, now, 0, now.Add(200*time.Millisecond))
	recv(t, r.renewed, 10*time.Second, "renewal")
	s.Remove(e)
	close(release)
	none(t, r.expires, 400*time.Millisecond, "expiry of a removed entry")
	none(t, r.renewed, 0, "renewal of a removed entry")
}

// TestAddTwice: adding an entry that is already scheduled reschedules it rather than
// scheduling it twice.
func TestAddTwice(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	s := New(r.renew, r.expire)
	defer s.Stop()
	e := &Entry{Value: "e"}
	s.Add(e, time.Time{}, 0, time.Now().Add(time.Hour))
	s.Add(e, time.Time{}, 0, time.Now().Add(50*time.Millisecond))
	if s.Len() != 1 {
		t.Fatalf("Len = %d after adding one entry twice", s.Len())
	}
	recv(t, r.expires, 10*time.Second, "expiry")
	none(t, r.expires, 100*time.Millisecond, "second expiry")
	s.Remove(e)
	if s.Len() != 0 {
		t.Fatalf("Len = %d", s.Len())
	}
}

// TestStopWaitsForRenewals: Stop returns only after the renewals in flight have returned;
// Add after Stop is refused, and scheduled entries are dropped without expiring.
func TestStopWaitsForRenewals(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	s := New(r.renew, r.expire)
	release := make(chan struct{})
	var returned atomic.Bool
	r.set(func(batch []*Entry) {
		<-release
		time.Sleep(20 * time.Millisecond)
		for _, e := range batch {
			s.Renewed(e, time.Now(), time.Now().Add(time.Hour)) // after Stop: no effect
		}
		returned.Store(true)
	})
	now := time.Now()
	s.Add(&Entry{Value: "inflight"}, now, 0, now.Add(time.Hour))
	s.Add(&Entry{Value: "idle"}, time.Time{}, 0, now.Add(200*time.Millisecond))
	recv(t, r.renewed, 10*time.Second, "renewal")

	stopped := make(chan struct{})
	go func() { s.Stop(); close(stopped) }()
	none(t, stopped, 100*time.Millisecond, "Stop return while a renewal is in flight")
	close(release)
	recv(t, stopped, 10*time.Second, "Stop return")
	if !returned.Load() {
		t.Fatal("Stop returned before the renewal did")
	}
	if s.Add(&Entry{Value: "late"}, time.Now(), 0, time.Now().Add(time.Hour)) {
		t.Fatal("Add after Stop = true")
	}
	if s.Len() != 0 {
		t.Fatalf("Len = %d after Stop", s.Len())
	}
	none(t, r.expires, 300*time.Millisecond, "expiry after Stop")
	s.Stop() // idempotent
}

func TestStopUnstarted(t *testing.T) {
	t.Parallel()
	s := New(func([]*Entry) {}, func(*Entry) {})
	s.Stop()
	if s.Add(&Entry{}, time.Time{}, 0, time.Now()) {
		t.Fatal("Add after Stop = true")
	}
}

// TestManyEntries renews 10,000 leases, all due within a few milliseconds of each other,
// for several rounds: each round goes out in a few large batches, and the scheduler does
// not grow a goroutine per lease.
func TestManyEntries(t *testing.T) {
	const (
		n      = 10_000
		period = 150 * time.Millisecond
		slack  = period / 2
		rounds = 4
	)
	r := newRecorder()
	r.renewed = make(chan []*Entry, 1024)
	s := New(r.renew, r.expire)
	defer s.Stop()

	var renewals atomic.Int64
	var goroutines atomic.Int64
	var slowest atomic.Int64 // the longest a callback took to report its batch
	r.set(func(batch []*Entry) {
		goroutines.Store(max(goroutines.Load(), int64(runtime.NumGoroutine())))
		now := time.Now()
		for _, e := range batch {
			s.Renewed(e, now.Add(period), now.Add(time.Hour))
		}
		renewals.Add(int64(len(batch)))
		slowest.Store(max(slowest.Load(), int64(time.Since(now))))
	})

	before := runtime.NumGoroutine()
	start := time.Now()
	// The first renewals are due once every entry has been added (which takes a while
	// with the race detector), spread over 10ms, as leases acquired in a burst would be.
	first := start.Add(time.Second)
	entries := make([]Entry, n)
	for i := range entries {
		entries[i].Value = i
		at := first.Add(time.Duration(i%10) * time.Millisecond)
		if !s.Add(&entries[i], at, slack, start.Add(time.Hour)) {
			t.Fatal("Add = false")
		}
	}
	if added := time.Since(start); added > time.Second-slack {
		t.Logf("adding %d entries took %v: the first round may be split", n, added)
	}
	deadline := time.Now().Add(30 * time.Second)
	for renewals.Load() < rounds*n {
		if time.Now().After(deadline) {
			t.Fatalf("%d renewals after 30s", renewals.Load())
		}
		time.Sleep(10 * time.Millisecond)
	}
	r.mu.Lock()
	batches := len(r.batches)
	sizes := make([]int, 0, batches)
	for _, b := range r.batches {
		sizes = append(sizes, len(b))
	}
	r.mu.Unlock()
	t.Logf("%d renewals in %d batches (sizes %v) in %v; goroutines %d before, at most %d during",
		renewals.Load(), batches, sizes, time.Since(start).Round(time.Millisecond), before, goroutines.Load())
	// Every round but a straggler one is one batch; allow for a noisy machine. A callback
	// that takes longer than the slack to report its batch (a loaded machine with the race
	// detector) leaves part of the round in flight when the rest falls due, which splits
	// rounds: then only check that batching still happened.
	done := max(1, int(renewals.Load()/n))
	limit := 3 * done
	if time.Duration(slowest.Load()) > slack/2 {
		t.Logf("a callback took %v to report (slack %v): rounds may split", time.Duration(slowest.Load()), slack)
		limit = n * done / 50
	}
	if batches > limit {
		t.Fatalf("%d batches for %d rounds of %d leases", batches, done, n)
	}
	// Goroutines are per batch in flight, never per lease: a round split by a slow
	// machine may have each of its batches in flight at once, but 10,000 leases must not
	// mean thousands of goroutines.
	if got := goroutines.Load(); got > int64(before+10+batches) {
		t.Fatalf("%d goroutines during renewal of %d leases in %d batches, %d before", got, n, batches, before)
	}
	if s.Len() != n {
		t.Fatalf("Len = %d, want %d", s.Len(), n)
	}
	for i := range entries {
		s.Remove(&entries[i])
	}
	if s.Len() != 0 {
		t.Fatalf("Len = %d after removing all", s.Len())
	}
	if len(r.expires) != 0 {
		t.Fatalf("%d entries expired", len(r.expires))
	}
	s.Stop()
	if after := runtime.NumGoroutine(); after > before+5 {
		t.Fatalf("%d goroutines after Stop, %d before", after, before)
	}
}

// armedAt waits until s's goroutine has looked at its heap and armed its timer.
func armedAt(t *testing.T, s *Scheduler) time.Time {
	t.Helper()
	for start := time.Now(); time.Since(start) < 10*time.Second; time.Sleep(time.Millisecond) {
		s.mu.Lock()
		armed := s.armed
		s.mu.Unlock()
		if !armed.IsZero() {
			return armed
		}
	}
	t.Fatal("the scheduler never armed its timer")
	return time.Time{}
}

// TestLaterEntryNeedsNoWake: an entry due after the earliest one does not wake the
// scheduler goroutine (the usual Lock, whose lease is due after every other's); one due
// sooner does, and is expired on time.
func TestLaterEntryNeedsNoWake(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	s := New(r.renew, r.expire)
	defer s.Stop()
	now := time.Now()
	s.Add(&Entry{Value: "first"}, time.Time{}, 0, now.Add(time.Hour))
	armedAt(t, s)
	for i := range 10 {
		s.Add(&Entry{Value: "later"}, time.Time{}, 0, now.Add(time.Hour+time.Duration(i+1)*time.Minute))
		if n := len(s.wake); n != 0 {
			t.Fatalf("adding an entry due later woke the scheduler (%d wake pending)", n)
		}
	}
	soon := &Entry{Value: "soon"}
	s.Add(soon, time.Time{}, 0, time.Now().Add(50*time.Millisecond))
	if e := recv(t, r.expires, 10*time.Second, "expiry of the entry due sooner"); e != soon {
		t.Fatalf("expired %v, want soon", e.Value)
	}
}

// TestEarliestRemoved: once the earliest entry is removed, the scheduler still looks at
// the next one on time (its timer fires early, finds nothing, and is armed again).
func TestEarliestRemoved(t *testing.T) {
	t.Parallel()
	r := newRecorder()
	s := New(r.renew, r.expire)
	defer s.Stop()
	now := time.Now()
	a, b := &Entry{Value: "a"}, &Entry{Value: "b"}
	s.Add(a, time.Time{}, 0, now.Add(50*time.Millisecond))
	armedAt(t, s)
	s.Remove(a)
	s.Add(b, now.Add(150*time.Millisecond), 0, now.Add(300*time.Millisecond))
	if got := recv(t, r.renewed, 10*time.Second, "renewal of b"); !slices.Equal(names(got), []string{"b"}) {
		t.Fatalf("renewed %v, want [b]", names(got))
	}
	if e := recv(t, r.expires, 10*time.Second, "expiry of b"); e != b {
		t.Fatalf("expired %v, want b", e.Value)
	}
	none(t, r.expires, 50*time.Millisecond, "expiry of the removed entry")
}
