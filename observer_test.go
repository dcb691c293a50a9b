package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// event is one call of an Observer, as a recorder received it.
type event struct {
	at time.Time
	e  any // dlock.WaitStart, Attempt, WaitEnd, HoldEnd, Renewal, HandOff or NodeSilence
}

// recorder is an Observer that keeps every event, in the order it received them.
type recorder struct {
	mu     sync.Mutex
	events []event
}

func (r *recorder) add(e any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.events = append(r.events, event{time.Now(), e})
}

func (r *recorder) observer() dlock.Observer {
	return dlock.Observer{
		WaitStarted: func(e dlock.WaitStart) { r.add(e) },
		Attempted:   func(e dlock.Attempt) { r.add(e) },
		WaitEnded:   func(e dlock.WaitEnd) { r.add(e) },
		HoldEnded:   func(e dlock.HoldEnd) { r.add(e) },
		Renewal:     func(e dlock.Renewal) { r.add(e) },
		HandedOff:   func(e dlock.HandOff) { r.add(e) },
		NodeSilent:  func(e dlock.NodeSilence) { r.add(e) },
	}
}

func (r *recorder) all() []event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.events)
}

// of returns the events of type T that match keep (nil: all), with their arrival times.
func of[T any](r *recorder, keep func(T) bool) (out []T, at []time.Time) {
	for _, ev := range r.all() {
		if e, ok := ev.e.(T); ok && (keep == nil || keep(e)) {
			out = append(out, e)
			at = append(at, ev.at)
		}
	}
	return out, at
}

func count[T any](r *recorder, keep func(T) bool) int {
	out, _ := of(r, keep)
	return len(out)
}

// await waits until the recorder has received an event of type T that keep accepts, and
// returns the first one with its arrival time.
func await[T any](t *testing.T, r *recorder, d time.Duration, what string, keep func(T) bool) (T, time.Time) {
	t.Helper()
	var e []T
	var at []time.Time
	waitFor(t, d, what, func() bool {
		e, at = of(r, keep)
		return len(e) > 0
	})
	return e[0], at[0]
}

func observed(t *testing.T, rdb redis.UniversalClient) (*dlock.Client, *recorder) {
	t.Helper()
	r := &recorder{}
	return newClient(t, rdb, dlock.WithObserver(r.observer())), r
}

// kindUnderTest is a kind of lock, taken by one Client and made unavailable to it by
// another.
type kindUnderTest struct {
	kind  string
	take  func(c *dlock.Client, ctx context.Context, try bool) (*dlock.Lease, error)
	block func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error)
}

var kindsUnderTest = []kindUnderTest{
	{dlock.KindMutex,
		func(c *dlock.Client, ctx context.Context, try bool) (*dlock.Lease, error) {
			if try {
				return c.Mutex("obs").TryLock(ctx)
			}
			return c.Mutex("obs").Lock(ctx)
		},
		func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) { return c.Mutex("obs").Lock(ctx) }},
	{dlock.KindFair,
		func(c *dlock.Client, ctx context.Context, try bool) (*dlock.Lease, error) {
			if try {
				return c.FairMutex("obs").TryLock(ctx)
			}
			return c.FairMutex("obs").Lock(ctx)
		},
		func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) { return c.FairMutex("obs").Lock(ctx) }},
	{dlock.KindRead,
		func(c *dlock.Client, ctx context.Context, try bool) (*dlock.Lease, error) {
			if try {
				return c.RWMutex("obs").TryRLock(ctx)
			}
			return c.RWMutex("obs").RLock(ctx)
		},
		func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) { return c.RWMutex("obs").Lock(ctx) }},
	{dlock.KindWrite,
		func(c *dlock.Client, ctx context.Context, try bool) (*dlock.Lease, error) {
			if try {
				return c.RWMutex("obs").TryLock(ctx)
			}
			return c.RWMutex("obs").Lock(ctx)
		},
		func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) { return c.RWMutex("obs").RLock(ctx) }},
	{dlock.KindSemaphore,
		func(c *dlock.Client, ctx context.Context, try bool) (*dlock.Lease, error) {
			if try {
				return c.Semaphore("obs", 1).TryAcquire(ctx, 1)
			}
			return c.Semaphore("obs", 1).Acquire(ctx, 1)
		},
		func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) {
			return c.Semaphore("obs", 1).Acquire(ctx, 1)
		}},
	{dlock.KindTimestamp,
		func(c *dlock.Client, ctx context.Context, try bool) (*dlock.Lease, error) {
			if try {
				return c.TimestampMutex("obs").TryLock(ctx)
			}
			return c.TimestampMutex("obs").Lock(ctx)
		},
		func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) {
			return c.TimestampMutex("obs").Lock(ctx)
		}},
}

// TestObserverCountsWorkload: for every kind of lock, N acquisitions and K TryLock
// refusals are N and K events of each kind, with the lock's name, kind and tokens, and
// nothing else.
func TestObserverCountsWorkload(t *testing.T) {
	const acquisitions, refusals = 4, 3
	for _, k := range kindsUnderTest {
		t.Run(k.kind, func(t *testing.T) {
			_, rdb := standalone(t)
			ctx := ctxTimeout(t, 20*time.Second)
			c, rec := observed(t, rdb)
			var tokens []uint64
			for range acquisitions {
				l, err := k.take(c, ctx, false)
				if err != nil {
					t.Fatal(err)
				}
				tokens = append(tokens, l.Token())
				if err := l.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			other, err := k.block(newClient(t, rdb), ctx)
			if err != nil {
				t.Fatal(err)
			}
			for range refusals {
				if _, err := k.take(c, ctx, true); !errors.Is(err, dlock.ErrNotAcquired) {
					t.Fatalf("TryLock of a held lock: %v, want ErrNotAcquired", err)
				}
			}
			_ = other.Unlock(ctx)

			for _, ev := range rec.all() {
				if name, kind := nameKind(ev.e); name != "obs" || kind != k.kind {
					t.Fatalf("event %#v: name %q kind %q, want obs, %s", ev.e, name, kind, k.kind)
				}
			}
			wantCounts(t, rec, map[string]int{
				"WaitStarted":          acquisitions + refusals,
				"WaitEnded acquired":   acquisitions,
				"WaitEnded refused":    refusals,
				"Attempted acquired":   acquisitions,
				"Attempted held":       refusals,
				"HoldEnded released":   acquisitions,
				"HoldEnded lost":       0,
				"Renewal":              0,
				"HandedOff":            0,
				"NodeSilent":           0,
				"WaitEnded 1 attempt":  acquisitions + refusals,
				"Attempted with error": 0,
			})
			ended, _ := of[dlock.WaitEnd](rec, func(e dlock.WaitEnd) bool { return e.Err == nil })
			held, _ := of[dlock.HoldEnd](rec, nil)
			for i := range tokens {
				if ended[i].Token != tokens[i] || held[i].Token != tokens[i] || held[i].Err != dlock.ErrReleased || held[i].Reason == "" {
					t.Fatalf("acquisition %d: token %d, WaitEnd %+v, HoldEnd %+v", i, tokens[i], ended[i], held[i])
				}
			}
		})
	}
}

// nameKind returns the lock name and kind an event names.
func nameKind(e any) (name, kind string) {
	switch e := e.(type) {
	case dlock.WaitStart:
		return e.Name, e.Kind
	case dlock.Attempt:
		return e.Name, e.Kind
	case dlock.WaitEnd:
		return e.Name, e.Kind
	case dlock.HoldEnd:
		return e.Name, e.Kind
	case dlock.Renewal:
		return e.Name, e.Kind
	case dlock.HandOff:
		return e.Name, e.Kind
	}
	return "", ""
}

// wantCounts checks the counts of the events named in want.
func wantCounts(t *testing.T, rec *recorder, want map[string]int) {
	t.Helper()
	got := map[string]int{
		"WaitStarted":         count[dlock.WaitStart](rec, nil),
		"WaitEnded acquired":  count(rec, func(e dlock.WaitEnd) bool { return e.Err == nil && e.Token > 0 }),
		"WaitEnded refused":   count(rec, func(e dlock.WaitEnd) bool { return errors.Is(e.Err, dlock.ErrNotAcquired) }),
		"Attempted acquired":  count(rec, func(e dlock.Attempt) bool { return e.Verdict == dlock.VerdictAcquired }),
		"Attempted held":      count(rec, func(e dlock.Attempt) bool { return e.Verdict == dlock.VerdictHeld }),
		"HoldEnded released":  count(rec, func(e dlock.HoldEnd) bool { return e.Cause == dlock.NotLost }),
		"HoldEnded lost":      count(rec, func(e dlock.HoldEnd) bool { return e.Cause != dlock.NotLost }),
		"Renewal":             count[dlock.Renewal](rec, nil),
		"HandedOff":           count[dlock.HandOff](rec, nil),
		"NodeSilent":          count[dlock.NodeSilence](rec, nil),
		"WaitEnded 1 attempt": count(rec, func(e dlock.WaitEnd) bool { return e.Attempts == 1 }),
		"Attempted with error": count(rec, func(e dlock.Attempt) bool {
			return e.Err != nil || e.Duration <= 0
		}),
	}
	for what, n := range want {
		if got[what] != n {
			t.Errorf("%s: %d events, want %d", what, got[what], n)
		}
	}
}

// TestObserverErrorAsReturned: a wait's WaitEnd.Err is the error its call returned, also
// where the kind marks it (a TimestampMutex key that holds no deadline: ErrNotTimestamp),
// and the attempt's error is marked the same way.
func TestObserverErrorAsReturned(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	c, rec := observed(t, rdb)
	if err := rdb.Set(ctx, "dlock:text", "hello", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, lock := range []func(context.Context) (*dlock.Lease, error){c.TimestampMutex("text").TryLock, c.TimestampMutex("text").Lock} {
		_, err := lock(ctx)
		if !errors.Is(err, dlock.ErrNotTimestamp) {
			t.Fatalf("Lock of a key that holds text: %v, want ErrNotTimestamp", err)
		}
		ends, _ := of[dlock.WaitEnd](rec, nil)
		if end := ends[len(ends)-1]; !errors.Is(end.Err, dlock.ErrNotTimestamp) || end.Err.Error() != err.Error() {
			t.Errorf("WaitEnd.Err %v, want the error returned: %v", end.Err, err)
		}
		attempts, _ := of[dlock.Attempt](rec, nil)
		if a := attempts[len(attempts)-1]; a.Verdict != dlock.VerdictFailed || !errors.Is(a.Err, dlock.ErrNotTimestamp) {
			t.Errorf("attempt %+v, want VerdictFailed with an error wrapping ErrNotTimestamp", a)
		}
	}
}

// TestObserverLossesAfterFlushAll: M leases whose keys FLUSHALL deleted are M losses with
// the cause LossTaken, each reported before its ValidUntil (by the next renewal).
func TestObserverLossesAfterFlushAll(t *testing.T) {
	const losses = 3
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	c, rec := observed(t, rdb)
	var leases []*dlock.Lease
	for i := range losses {
		leases = append(leases, mustLock(t, c.Mutex(fmt.Sprint("flushed-", i), dlock.TTL(time.Second)), ctx))
	}
	valid := map[string]time.Time{}
	for _, l := range leases {
		valid[l.Name()] = l.ValidUntil()
	}
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 5*time.Second, "the losses", func() bool { return count[dlock.HoldEnd](rec, nil) == losses })
	ends, at := of[dlock.HoldEnd](rec, nil)
	for i, e := range ends {
		l := leases[slices.IndexFunc(leases, func(l *dlock.Lease) bool { return l.Name() == e.Name })]
		if e.Cause != dlock.LossTaken || e.Err != dlock.ErrLost || e.Token != l.Token() || !strings.Contains(e.Reason, "no longer holds") {
			t.Errorf("HoldEnd %+v, want LossTaken of token %d", e, l.Token())
		}
		if at[i].After(valid[e.Name]) {
			t.Errorf("%s: loss reported %v after the ValidUntil it had before FLUSHALL", e.Name, at[i].Sub(valid[e.Name]))
		}
	}
}

// TestObserverLossWhenServerHangs: a hung server makes renewals fail, each reported, and
// then the lease is lost at its deadline: LossExpired, reported at ValidUntil.
func TestObserverLossWhenServerHangs(t *testing.T) {
	srv, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	c, rec := observed(t, rdb)
	l := mustLock(t, c.Mutex("hung", dlock.TTL(time.Second)), ctx)
	srv.Pause(t)
	defer srv.Resume(t)
	end, at := await(t, rec, 5*time.Second, "the loss", func(dlock.HoldEnd) bool { return true })
	valid := l.ValidUntil()
	const slack = 500 * time.Millisecond // the scheduler's timer on a loaded machine
	t.Logf("loss reported %v after ValidUntil", at.Sub(valid))
	if at.Before(valid) || at.After(valid.Add(slack)) {
		t.Errorf("loss reported %v after ValidUntil, want within [0, %v]", at.Sub(valid), slack)
	}
	if end.Cause != dlock.LossExpired || end.Err != dlock.ErrLost || end.Held < 900*time.Millisecond {
		t.Errorf("HoldEnd %+v, want LossExpired after about a second", end)
	}
	failed, failedAt := of(rec, func(e dlock.Renewal) bool { return e.Err != nil })
	if len(failed) == 0 || failed[0].Failures != 1 || failedAt[len(failed)-1].After(at) {
		t.Errorf("renewal failures %+v, want at least one, counted from 1, before the loss", failed)
	}
	if n := count(rec, func(e dlock.Renewal) bool { return e.Recovered }); n != 0 {
		t.Errorf("%d recoveries on a hung server", n)
	}
}

// TestObserverRenewalRecovers: renewals that fail while the server hangs, and the first
// that succeeds once it is back, are reported in order, with the count of failures; the
// lease stays held.
func TestObserverRenewalRecovers(t *testing.T) {
	srv, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	c, rec := observed(t, rdb)
	l := mustLock(t, c.Mutex("flaky", dlock.TTL(3*time.Second)), ctx)
	srv.Pause(t)
	failure, _ := await(t, rec, 5*time.Second, "a failed renewal", func(e dlock.Renewal) bool { return e.Err != nil })
	srv.Resume(t)
	recovered, _ := await(t, rec, 5*time.Second, "the recovery", func(e dlock.Renewal) bool { return e.Recovered })
	if l.Err() != nil {
		t.Fatalf("lease lost although the server came back in time: %v", l.Err())
	}
	var qe *dlock.QuorumError
	if !errors.As(failure.Err, &qe) || !strings.Contains(failure.Err.Error(), srv.Addr) || failure.Left <= 0 {
		t.Errorf("failed renewal %+v: want a QuorumError naming %s, with time left", failure, srv.Addr)
	}
	renewals, _ := of[dlock.Renewal](rec, nil)
	for i, r := range renewals[:len(renewals)-1] {
		if r.Recovered || r.Failures != i+1 || r.Token != l.Token() {
			t.Errorf("renewal event %d: %+v, want failure number %d", i, r, i+1)
		}
	}
	if recovered.Failures != len(renewals)-1 || recovered.Err != nil || recovered.Left <= 0 {
		t.Errorf("recovery %+v after %d failures", recovered, len(renewals)-1)
	}
	_ = l.Unlock(ctx)
	if n := count(rec, func(e dlock.HoldEnd) bool { return e.Cause == dlock.NotLost }); n != 1 {
		t.Errorf("%d releases, want 1", n)
	}
}

// TestObserverFailedAttempts: attempts on a dead server are VerdictFailed with the error,
// and the wait that gives up after them says how many it made.
func TestObserverFailedAttempts(t *testing.T) {
	srv, rdb := standalone(t)
	c, rec := observed(t, rdb)
	srv.Kill(t)
	_, err := c.Mutex("dead", dlock.TTL(300*time.Millisecond)).Lock(ctxTimeout(t, 20*time.Second))
	if err == nil {
		t.Fatal("Lock on a dead server succeeded")
	}
	ends, _ := of[dlock.WaitEnd](rec, nil)
	attempts, _ := of[dlock.Attempt](rec, nil)
	if len(ends) != 1 || ends[0].Err == nil || ends[0].Err.Error() != err.Error() || ends[0].Attempts != len(attempts) || len(attempts) < 2 {
		t.Fatalf("WaitEnd %+v after %d attempts; Lock returned %v", ends, len(attempts), err)
	}
	t.Logf("%d attempts: %v", len(attempts), err)
	for _, a := range attempts {
		if a.Verdict != dlock.VerdictFailed || a.Err == nil {
			t.Errorf("attempt on a dead server: %+v, want VerdictFailed with an error", a)
		}
	}
}

// TestObserverLocalHandOff: goroutines of one process that queued while the lock was
// taken are handed it in turn: one HandedOff (Local) each, before their WaitEnded.
func TestObserverLocalHandOff(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	c, rec := observed(t, rdb)
	m := c.Mutex("handoff")
	first := mustLock(t, m, ctx)
	leases := queueUp(t, ctx, m, 3)
	_ = first.Unlock(ctx)
	var tokens []uint64
	for range 3 {
		l := <-leases
		if l == nil {
			t.FailNow()
		}
		tokens = append(tokens, l.Token())
		_ = l.Unlock(ctx)
	}
	// The first waiter acquires through Redis, reserving tokens for the two others.
	handed, _ := of[dlock.HandOff](rec, nil)
	want := []dlock.HandOff{
		{Name: "handoff", Kind: dlock.KindMutex, Owner: defaultOwner(t), Token: tokens[1], Local: true},
		{Name: "handoff", Kind: dlock.KindMutex, Owner: defaultOwner(t), Token: tokens[2], Local: true},
	}
	if !slices.Equal(handed, want) {
		t.Fatalf("hand-offs %+v, want %+v", handed, want)
	}
	if n := count(rec, func(e dlock.WaitEnd) bool { return e.Err == nil && e.Attempts == 0 }); n != 2 {
		t.Errorf("%d waits ended without an attempt, want the 2 handed the lock", n)
	}
	checkLeaseOrder(t, rec)
}

// TestObserverHoldEventsWaitForWaitEnded: a hold lost before the Lock call that got it has
// returned is reported after that call's WaitEnded, not before.
func TestObserverHoldEventsWaitForWaitEnded(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	rec := &recorder{}
	o := rec.observer()
	o.HandedOff = func(e dlock.HandOff) {
		rec.add(e)
		// Hold up the goroutine handed the lock while its hold is lost.
		rdb.Del(context.Background(), "dlock:early")
		time.Sleep(400 * time.Millisecond)
	}
	m := newClient(t, rdb, dlock.WithObserver(o)).Mutex("early", dlock.TTL(300*time.Millisecond))
	first := mustLock(t, m, ctx)
	leases := queueUp(t, ctx, m, 2)
	_ = first.Unlock(ctx)
	_ = (<-leases).Unlock(ctx) // acquired through Redis, and handed to the second waiter
	l := <-leases
	if l.Err() != dlock.ErrLost {
		t.Fatalf("the lease handed over was not lost while its Lock was held up: %v", l.Err())
	}
	ends, _ := of(rec, func(e dlock.HoldEnd) bool { return e.Token == l.Token() })
	if len(ends) != 1 || ends[0].Cause == dlock.NotLost {
		t.Fatalf("ends of the lost lease: %+v", ends)
	}
	checkLeaseOrder(t, rec)
}

// TestObserverGrantBetweenClients: a release in Redis that grants the lock to a waiting
// process is a HandedOff (not Local) in that process.
func TestObserverGrantBetweenClients(t *testing.T) {
	for _, tc := range []struct {
		kind, queue string
		lock        func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error)
	}{
		{dlock.KindMutex, "{dlock:grant}:turns", func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) {
			return c.Mutex("grant").Lock(ctx)
		}},
		{dlock.KindFair, "{dlock:grant}:queue", func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) {
			return c.FairMutex("grant").Lock(ctx)
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			_, rdb := standalone(t)
			ctx := ctxTimeout(t, 20*time.Second)
			holder, err := tc.lock(newClient(t, rdb), ctx)
			if err != nil {
				t.Fatal(err)
			}
			c, rec := observed(t, rdb)
			got := make(chan *dlock.Lease, 1)
			go func() {
				l, err := tc.lock(c, ctx)
				if err != nil {
					t.Error(err)
				}
				got <- l
			}()
			waitFor(t, 5*time.Second, "the waiter in Redis", func() bool { return rdb.LLen(ctx, tc.queue).Val() == 1 })
			// Let the waiter subscribe, which it does right after it is listed.
			waitFor(t, 5*time.Second, "a second attempt", func() bool { return count[dlock.Attempt](rec, nil) >= 2 })
			time.Sleep(50 * time.Millisecond)
			_ = holder.Unlock(ctx)
			l := <-got
			if l == nil {
				t.FailNow()
			}
			_ = l.Unlock(ctx)
			handed, _ := of[dlock.HandOff](rec, nil)
			if want := []dlock.HandOff{{Name: "grant", Kind: tc.kind, Owner: defaultOwner(t), Token: l.Token(), Local: false}}; !slices.Equal(handed, want) {
				t.Fatalf("hand-offs %+v, want %+v", handed, want)
			}
			checkLeaseOrder(t, rec)
		})
	}
}

// TestObserverHoldEndedLockFree: when HoldEnded is sent, the hold has ended in this
// process too: a TryLock of the same Mutex, made while the event is in progress (by a
// goroutine the observer starts), is not refused on the ended hold's account, whether
// Unlock ended it or a renewal found the key gone.
func TestObserverHoldEndedLockFree(t *testing.T) {
	for _, tc := range []struct {
		name string
		end  func(ctx context.Context, rdb *redis.Client, l *dlock.Lease) error
	}{
		{"released", func(ctx context.Context, _ *redis.Client, l *dlock.Lease) error { return l.Unlock(ctx) }},
		{"taken", func(ctx context.Context, rdb *redis.Client, _ *dlock.Lease) error {
			return rdb.Del(ctx, "dlock:again").Err() // the next renewal finds it gone
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, rdb := standalone(t)
			ctx := ctxTimeout(t, 20*time.Second)
			var m *dlock.Mutex
			retaken := make(chan *dlock.Lease, 1)
			c := newClient(t, rdb, dlock.WithObserver(dlock.Observer{HoldEnded: func(e dlock.HoldEnd) {
				if e.Token != 1 {
					return // the lease taken again
				}
				again := make(chan *dlock.Lease, 1)
				go func() {
					l, err := m.TryLock(ctx)
					if err != nil {
						t.Errorf("TryLock while HoldEnded of the lease before is sent: %v", err)
					}
					again <- l
				}()
				// An observer must not wait; the test does, to make the TryLock while the
				// event is in progress.
				select {
				case l := <-again:
					retaken <- l
				case <-time.After(5 * time.Second):
					t.Error("TryLock did not return within 5s")
					retaken <- nil
				}
			}}))
			m = c.Mutex("again", dlock.TTL(time.Second))
			l := mustLock(t, m, ctx)
			if err := tc.end(ctx, rdb, l); err != nil {
				t.Fatal(err)
			}
			select {
			case again := <-retaken:
				if again != nil {
					_ = again.Unlock(ctx)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("no HoldEnded within 10s")
			}
		})
	}
}

// TestObserverHandOffDelivered: HandedOff is sent only for a lease that its Lock call
// delivers. A grant's hold is started before it is reported, so a Close that begins in
// HandedOff, as late as it can come, still lets the Lock return that lease (Close then
// releases it): no hand-off is reported for a hold that Close kept from its waiter.
func TestObserverHandOffDelivered(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	holder := mustLock(t, newClient(t, rdb).Mutex("grant"), ctx)
	rec := &recorder{}
	o := rec.observer()
	var c *dlock.Client
	closed := make(chan error, 1)
	o.HandedOff = func(e dlock.HandOff) {
		rec.add(e)
		go func() { closed <- c.Close() }()
		for end := time.Now().Add(5 * time.Second); time.Now().Before(end); time.Sleep(time.Millisecond) {
			if _, err := c.Inspect(ctx, "grant"); errors.Is(err, dlock.ErrClosed) {
				return // Close has begun
			}
		}
		t.Error("Close did not begin within 5s")
	}
	c = newClient(t, rdb, dlock.WithObserver(o))
	got := make(chan error, 1)
	go func() {
		_, err := c.Mutex("grant").Lock(ctx)
		got <- err
	}()
	waitFor(t, 5*time.Second, "the waiter in Redis", func() bool { return rdb.LLen(ctx, "{dlock:grant}:turns").Val() == 1 })
	waitFor(t, 5*time.Second, "a second attempt", func() bool { return count[dlock.Attempt](rec, nil) >= 2 })
	time.Sleep(50 * time.Millisecond) // let the waiter subscribe, right after it is listed
	_ = holder.Unlock(ctx)
	err := <-got
	if cerr := <-closed; cerr != nil {
		t.Errorf("Close: %v", cerr)
	}
	if n := count[dlock.HandOff](rec, nil); n != 1 {
		t.Fatalf("%d hand-offs, want the grant's", n)
	}
	if err != nil {
		t.Errorf("Lock after its hand-off was reported: %v, want the lease", err)
	}
	checkLeaseOrder(t, rec)
}

// TestObserverNodeSilent: a quorum node that hangs is reported once when it becomes
// silent, however many requests it then misses.
func TestObserverNodeSilent(t *testing.T) {
	servers, nodes, _ := quorumOf(t, 3)
	ctx := ctxTimeout(t, 30*time.Second)
	servers[0].Pause(t)
	defer servers[0].Resume(t)
	holder := newQuorumClient(t, nodes)
	rec := &recorder{}
	waiter := newQuorumClient(t, nodes, dlock.WithObserver(rec.observer()))
	for range 3 {
		l := mustLock(t, holder.Mutex("silent"), ctx)
		// The waiter listens on every node; the hung one lets its subscription time out.
		wctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := waiter.Mutex("silent").Lock(wctx)
		cancel()
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock of a held lock: %v, want the ctx's deadline", err)
		}
		_ = l.Unlock(ctx)
	}
	silent, _ := of[dlock.NodeSilence](rec, nil)
	if want := []dlock.NodeSilence{{Addr: servers[0].Addr}}; !slices.Equal(silent, want) {
		t.Fatalf("NodeSilent %+v, want %+v (once)", silent, want)
	}
}

// TestObserverNodeSilentOnRenewal: a quorum node that hangs while a lease is only being
// renewed (no attempt, no waiter) is reported silent once, and the lease, renewed by the
// others, stays held.
func TestObserverNodeSilentOnRenewal(t *testing.T) {
	servers, nodes, _ := quorumOf(t, 3)
	ctx := ctxTimeout(t, 30*time.Second)
	rec := &recorder{}
	c := newQuorumClient(t, nodes, dlock.WithObserver(rec.observer()))
	l := mustLock(t, c.Mutex("renewed", dlock.TTL(time.Second)), ctx)
	servers[0].Pause(t)
	defer servers[0].Resume(t)
	await(t, rec, 5*time.Second, "NodeSilent", func(dlock.NodeSilence) bool { return true })
	time.Sleep(time.Second) // three more renewals that it misses
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost while two of three nodes renewed it: %v", err)
	}
	silent, _ := of[dlock.NodeSilence](rec, nil)
	if want := []dlock.NodeSilence{{Addr: servers[0].Addr}}; !slices.Equal(silent, want) {
		t.Fatalf("NodeSilent %+v, want %+v (once)", silent, want)
	}
	servers[0].Resume(t)
	_ = l.Unlock(ctx)
}

// TestObserverEventOrderPerLease: under contention, a hanging server and losses, the events of
// each lease arrive in order: a hand-off, if any, then its WaitEnded, its renewals, and
// its end; every wait that started ends, and the attempts add up.
func TestObserverEventOrderPerLease(t *testing.T) {
	srv, rdb := standalone(t)
	ctx := ctxTimeout(t, 60*time.Second)
	rec := &recorder{}
	clients := []*dlock.Client{
		newClient(t, rdb, dlock.WithObserver(rec.observer())),
		newClient(t, rdb, dlock.WithObserver(rec.observer())),
	}
	var wg sync.WaitGroup
	for i := range 6 {
		c := clients[i%2]
		wg.Go(func() {
			for j := range 5 {
				m := c.Mutex("order", dlock.TTL(300*time.Millisecond))
				var l *dlock.Lease
				var err error
				if j%2 == 0 {
					l, err = m.Lock(ctx)
				} else {
					l, err = c.FairMutex("order-fair", dlock.TTL(300*time.Millisecond)).Lock(ctx)
				}
				if err != nil {
					continue // the server hung too long
				}
				time.Sleep(time.Duration(20+40*j) * time.Millisecond) // renewed from 100ms
				_ = l.Unlock(ctx)
			}
		})
	}
	wg.Go(func() { // losses: the key deleted under its holder
		for range 5 {
			time.Sleep(150 * time.Millisecond)
			rdb.Del(ctx, "dlock:order")
		}
	})
	wg.Go(func() { // renewals that fail, then recover or expire
		for range 2 {
			time.Sleep(300 * time.Millisecond)
			srv.Pause(t)
			time.Sleep(250 * time.Millisecond)
			srv.Resume(t)
		}
	})
	wg.Wait()
	t.Logf("%d leases taken, %d expired, %d handed off, %d renewal events, %d waits failed",
		count(rec, func(e dlock.HoldEnd) bool { return e.Cause == dlock.LossTaken }),
		count(rec, func(e dlock.HoldEnd) bool { return e.Cause == dlock.LossExpired }),
		count[dlock.HandOff](rec, nil), count[dlock.Renewal](rec, nil),
		count(rec, func(e dlock.WaitEnd) bool { return e.Err != nil }))
	checkLeaseOrder(t, rec)
	started, ended := count[dlock.WaitStart](rec, nil), count[dlock.WaitEnd](rec, nil)
	attempts, _ := of[dlock.WaitEnd](rec, nil)
	sum := 0
	for _, e := range attempts {
		sum += e.Attempts
	}
	if started != 30 || ended != 30 || sum != count[dlock.Attempt](rec, nil) {
		t.Fatalf("%d waits started, %d ended, %d attempts counted, %d reported", started, ended, sum, count[dlock.Attempt](rec, nil))
	}
}

// checkLeaseOrder checks that the events of each lease (a name, kind and token that a
// WaitEnd delivered) came in the order [HandedOff] WaitEnded Renewal* HoldEnded, and that
// every lease ended.
func checkLeaseOrder(t *testing.T, rec *recorder) {
	t.Helper()
	type lease struct {
		name, kind string
		token      uint64
	}
	seqs := map[lease][]string{}
	for _, ev := range rec.all() {
		var k lease
		var step string
		switch e := ev.e.(type) {
		case dlock.HandOff:
			k, step = lease{e.Name, e.Kind, e.Token}, "H"
		case dlock.WaitEnd:
			if e.Err != nil {
				continue
			}
			k, step = lease{e.Name, e.Kind, e.Token}, "W"
		case dlock.Renewal:
			k, step = lease{e.Name, e.Kind, e.Token}, "R"
		case dlock.HoldEnd:
			k, step = lease{e.Name, e.Kind, e.Token}, "E"
		default:
			continue
		}
		seqs[k] = append(seqs[k], step)
	}
	for k, seq := range seqs {
		s := strings.Join(seq, "")
		body, _ := strings.CutPrefix(s, "H")
		if !strings.HasPrefix(body, "W") || !strings.HasSuffix(body, "E") || strings.Trim(body[1:len(body)-1], "R") != "" {
			t.Errorf("lease %v: events %s, want [H]WR*E", k, s)
		}
	}
	if len(seqs) == 0 {
		t.Error("no lease was observed")
	}
}

// TestEveryObserverSeesEveryEvent: with WithObserver given twice, each observer receives
// every event, the first before the second.
func TestEveryObserverSeesEveryEvent(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	var mu sync.Mutex
	var calls []string
	both := func(r *recorder, id string) dlock.Observer {
		o := r.observer()
		wait := o.WaitEnded
		o.WaitEnded = func(e dlock.WaitEnd) {
			mu.Lock()
			calls = append(calls, id)
			mu.Unlock()
			wait(e)
		}
		return o
	}
	first, second := &recorder{}, &recorder{}
	c := newClient(t, rdb, dlock.WithObserver(both(first, "first")), dlock.WithObserver(both(second, "second")))
	holder := mustLock(t, newClient(t, rdb).Mutex("held"), ctx)
	for range 3 {
		_ = mustLock(t, c.Mutex("both"), ctx).Unlock(ctx)
		if _, err := c.Mutex("held").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatal(err)
		}
	}
	_ = holder.Unlock(ctx)
	a, b := first.all(), second.all()
	// Each round: Lock and Unlock are 4 events (started, attempted, ended, hold ended),
	// a refused TryLock 3.
	if len(a) != 3*(4+3) || len(a) != len(b) {
		t.Fatalf("%d and %d events, want 21 each", len(a), len(b))
	}
	for i := range a {
		if !reflect.DeepEqual(a[i].e, b[i].e) { // the same values: the same ctx, error and durations
			t.Fatalf("event %d: %+v and %+v", i, a[i].e, b[i].e)
		}
	}
	if want := slices.Repeat([]string{"first", "second"}, 6); !slices.Equal(calls, want) {
		t.Fatalf("calls %v, want %v", calls, want)
	}
}
