package dlock_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

func TestLockUnlock(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	m := c.Mutex("orders")

	l := mustLock(t, m, ctx)
	if l.Name() != "orders" || l.Token() == 0 || l.Err() != nil {
		t.Fatalf("lease: name %q token %d err %v", l.Name(), l.Token(), l.Err())
	}
	if left := time.Until(l.ValidUntil()); left <= 0 || left > dlock.DefaultTTL {
		t.Fatalf("ValidUntil is %v from now, want within (0, %v]", left, dlock.DefaultTTL)
	}
	val, err := rdb.Get(ctx, "dlock:orders").Result()
	if err != nil || len(val) != 48 {
		t.Fatalf("lock key holds %q (%v), want the Client's id and a 128-bit hex token", val, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if l.Err() != dlock.ErrReleased {
		t.Fatalf("Err after Unlock = %v, want ErrReleased", l.Err())
	}
	waitClosed(t, l.Done(), time.Second, "Done after Unlock")
	if context.Cause(l.Context()) != dlock.ErrReleased {
		t.Fatalf("context cause = %v", context.Cause(l.Context()))
	}
	if n, _ := rdb.Exists(ctx, "dlock:orders").Result(); n != 0 {
		t.Fatal("lock key still exists after Unlock")
	}
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
	}
	if err := l.Extend(ctx, time.Second); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Extend after Unlock = %v, want ErrNotHeld", err)
	}
}

func TestTryLock(t *testing.T) {
	_, rdb := standalone(t)
	a, b := newClient(t, rdb), newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)

	l, err := a.Mutex("job").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock on a free lock: %v", err)
	}
	if _, err := b.Mutex("job").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock by another client = %v, want ErrNotAcquired", err)
	}
	if _, err := a.Mutex("job").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock by the holder's client without its context = %v, want ErrNotAcquired", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l2, err := b.Mutex("job").TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock after Unlock: %v", err)
	}
	if l2.Token() <= l.Token() {
		t.Fatalf("fencing token went from %d to %d", l.Token(), l2.Token())
	}
	_ = l2.Unlock(ctx)
}

func TestFencingTokensGrowAcrossClients(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	var last uint64
	for i := range 20 {
		c := dlock.New(rdb) // a fresh client each time: tokens survive client restarts
		l, err := c.Mutex("fenced").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if l.Token() <= last {
			t.Fatalf("acquisition %d: token %d not above %d", i, l.Token(), last)
		}
		last = l.Token()
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
		if l.Err() != dlock.ErrReleased {
			t.Fatalf("Close left the lease in state %v", l.Err())
		}
	}
}

func TestReentry(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	m := c.Mutex("reentrant")
	outer := mustLock(t, m, ctx)

	before := scriptCalls(t, rdb)
	inner, err := m.Lock(outer.Context())
	if err != nil {
		t.Fatalf("re-entrant Lock: %v", err)
	}
	// A context derived from the lease's, with another lease layered on top, still carries it.
	other := mustLock(t, c.Mutex("other"), outer.Context())
	derived, cancel := context.WithCancel(other.Context())
	defer cancel()
	inner2, err := c.Mutex("reentrant").TryLock(derived)
	if err != nil {
		t.Fatalf("re-entrant TryLock through a nested context: %v", err)
	}
	if err := m.Do(inner.Context(), func(context.Context) error { return nil }); err != nil {
		t.Fatalf("re-entrant Do: %v", err)
	}
	if got := scriptCalls(t, rdb) - before; got != 1 { // the Lock of "other" only
		t.Fatalf("re-entry made %d requests, want none", got-1)
	}
	if inner.Token() != outer.Token() || inner2.Token() != outer.Token() {
		t.Fatal("re-entry changed the fencing token")
	}
	// Re-entry through another client is not re-entry.
	if _, err := newClient(t, rdb).Mutex("reentrant").TryLock(outer.Context()); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of another client with the lease's context = %v, want ErrNotAcquired", err)
	}

	if err := inner.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if inner.Err() != dlock.ErrReleased || outer.Err() != nil {
		t.Fatalf("after inner Unlock: inner %v outer %v", inner.Err(), outer.Err())
	}
	if n, _ := rdb.Exists(ctx, "dlock:reentrant").Result(); n != 1 {
		t.Fatal("inner Unlock released the lock")
	}
	if err := inner.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("inner Unlock twice = %v", err)
	}
	if err := outer.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, inner2.Done(), time.Second, "inner lease ends with the outer")
	if n, _ := rdb.Exists(ctx, "dlock:reentrant").Result(); n != 0 {
		t.Fatal("outer Unlock did not release the lock")
	}
	// A context of an ended lease no longer re-enters: it is cancelled, so Lock says so.
	if _, err := m.Lock(outer.Context()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Lock with an ended lease's context = %v, want context.Canceled", err)
	}
	_ = other.Unlock(ctx)
}

func TestLeaseContextKeepsValuesNotCancellation(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	type key struct{}
	ctx, cancel := context.WithTimeout(context.WithValue(context.Background(), key{}, "v"), 10*time.Second)
	l := mustLock(t, c.Mutex("ctx"), ctx)
	cancel()
	if l.Context().Value(key{}) != "v" {
		t.Fatal("lease context lost the Lock context's value")
	}
	if l.Context().Err() != nil {
		t.Fatal("lease context was cancelled with the Lock context")
	}
	if _, ok := l.Context().Deadline(); ok {
		t.Fatal("lease context kept the Lock context's deadline")
	}
	_ = l.Unlock(context.Background())
}

func TestDo(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	m := c.Mutex("do")
	boom := errors.New("boom")
	err := m.Do(ctx, func(ctx context.Context) error {
		if n, _ := rdb.Exists(ctx, "dlock:do").Result(); n != 1 {
			t.Error("lock not held inside Do")
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Do = %v, want fn's error", err)
	}
	if n, _ := rdb.Exists(ctx, "dlock:do").Result(); n != 0 {
		t.Fatal("Do did not unlock")
	}
	// A lease lost while fn runs makes Do report ErrLost.
	err = c.Mutex("do", dlock.TTL(50*time.Millisecond), dlock.NoRenew()).Do(ctx, func(ctx context.Context) error {
		<-ctx.Done()
		return nil
	})
	if !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Do with a lost lease = %v, want ErrLost", err)
	}
}

func TestBadInput(t *testing.T) {
	srv, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	good := newClient(t, rdb)
	tests := []struct {
		name string
		lock func() error
		want string
	}{
		{"empty name", func() error { _, err := good.Mutex("").Lock(ctx); return err }, "empty lock name"},
		{"zero TTL", func() error { _, err := good.Mutex("x", dlock.TTL(0)).Lock(ctx); return err }, "TTL 0s is too short"},
		{"negative TTL", func() error { _, err := good.Mutex("x", dlock.TTL(-time.Second)).TryLock(ctx); return err }, "TTL -1s is too short"},
		{"TTL below 10ms", func() error { _, err := good.Mutex("x", dlock.TTL(9*time.Millisecond)).Lock(ctx); return err }, "at least 10ms"},
		{"brace outside tag", func() error { _, err := good.Mutex("a}b").Lock(ctx); return err }, "'}' outside a hash tag"},
		{"nil client", func() error { _, err := dlock.New(nil).Mutex("x").Lock(ctx); return err }, "nil Redis client"},
		{"drift factor", func() error { _, err := dlock.New(rdb, dlock.WithDriftFactor(2)).Mutex("x").Lock(ctx); return err }, "drift factor 2 is out of range"},
		{"Do with bad name", func() error { return good.Mutex("").Do(ctx, func(context.Context) error { return nil }) }, "empty lock name"},
		{"wrong type", func() error {
			rdb.HSet(ctx, "dlock:hash", "f", "v")
			_, err := good.Mutex("hash").Lock(ctx)
			return err
		}, "WRONGTYPE"},
		{"extend with bad TTL", func() error {
			l, err := good.Mutex("ext").Lock(ctx)
			if err != nil {
				return err
			}
			defer l.Unlock(ctx)
			return l.Extend(ctx, 0)
		}, "TTL 0s is too short"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.lock()
			if err == nil {
				t.Fatal("no error")
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %q does not say %q", err, tt.want)
			}
			t.Log(err)
		})
	}
	if _, err := dlock.NewQuorum(nil); err == nil {
		t.Fatal("NewQuorum with no nodes succeeded")
	}
	if _, err := dlock.NewQuorum([]redis.UniversalClient{rdb, nil}); err == nil {
		t.Fatal("NewQuorum with a nil node succeeded")
	}
	if _, err := dlock.NewQuorum([]redis.UniversalClient{rdb, srv.Client(t)}); err == nil || !strings.Contains(err.Error(), "both") {
		t.Fatalf("NewQuorum with one server twice: %v", err)
	}
	if err := dlock.New(nil).Close(); err != nil {
		t.Fatalf("Close of a failed client: %v", err)
	}
}

func TestWrongPasswordSaysSo(t *testing.T) {
	srv := redistest.Start(t, redistest.WithPassword("s3cret"))
	opts := srv.Options()
	opts.Password = "wrong"
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	c := dlock.New(rdb)
	defer c.Close()
	ctx := ctxTimeout(t, 10*time.Second)
	_, err := c.Mutex("x").Lock(ctx) // Lock, not TryLock: a permanent error must not be retried until ctx ends
	if err == nil || !strings.Contains(err.Error(), "credentials") || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Lock with a wrong password = %v, want an immediate error about the credentials", err)
	}
	if strings.Contains(err.Error(), "wrong") && strings.Contains(err.Error(), "password wrong") {
		t.Fatalf("error shows the password: %v", err)
	}
}

func TestUnreachableServer(t *testing.T) {
	srv, rdb := standalone(t)
	srv.Kill(t)
	c := newClient(t, rdb)
	for _, try := range []bool{false, true} {
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		start := time.Now()
		var err error
		if try {
			_, err = c.Mutex("x").TryLock(ctx)
		} else {
			_, err = c.Mutex("x").Lock(ctx)
		}
		cancel()
		if err == nil {
			t.Fatal("lock on a dead server succeeded")
		}
		if !try && !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock on a dead server = %v, want it to wrap DeadlineExceeded", err)
		}
		if elapsed := time.Since(start); elapsed > 5*time.Second {
			t.Fatalf("gave up after %v: the ctx said 300ms", elapsed)
		}
		t.Log(err)
	}
}

func TestHungServerDoesNotHang(t *testing.T) {
	srv, rdb := standalone(t)
	c := newClient(t, rdb)
	srv.Pause(t)
	defer srv.Resume(t)
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	defer cancel()
	done := make(chan error, 1)
	go func() { _, err := c.Mutex("x").Lock(ctx); done <- err }()
	select {
	case err := <-done:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Lock on a hung server = %v, want DeadlineExceeded", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Lock on a hung server hangs past its ctx")
	}
}

func TestCloseReleasesAndRefuses(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 10*time.Second)
	c := dlock.New(rdb)
	l := mustLock(t, c.Mutex("closing"), ctx)
	holder := newClient(t, rdb)
	held := mustLock(t, holder.Mutex("busy"), ctx)
	waitErr := make(chan error, 1)
	go func() { _, err := c.Mutex("busy").Lock(ctx); waitErr <- err }()
	time.Sleep(50 * time.Millisecond)

	if err := c.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := <-waitErr; !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("waiting Lock after Close = %v, want ErrClosed", err)
	}
	if l.Err() != dlock.ErrReleased {
		t.Fatalf("lease after Close: %v", l.Err())
	}
	if n, _ := rdb.Exists(ctx, "dlock:closing").Result(); n != 0 {
		t.Fatal("Close did not release the lock")
	}
	if _, err := c.Mutex("x").Lock(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("Lock on a closed client = %v", err)
	}
	if _, err := c.Mutex("x").TryLock(ctx); !errors.Is(err, dlock.ErrClosed) {
		t.Fatalf("TryLock on a closed client = %v", err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	_ = held.Unlock(ctx)
}

func TestLocalGoroutinesExclude(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 60*time.Second)
	var mu sync.Mutex
	inside, counter := 0, 0
	var wg sync.WaitGroup
	for range 16 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				err := c.Mutex("local").Do(ctx, func(context.Context) error {
					mu.Lock()
					inside++
					if inside != 1 {
						t.Errorf("%d holders at once", inside)
					}
					mu.Unlock()
					counter++ // the count below checks that increments were not lost
					mu.Lock()
					inside--
					mu.Unlock()
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if counter != 16*20 {
		t.Fatalf("counter %d, want %d", counter, 16*20)
	}
}

func TestUnlockWithEndedContextStillReleases(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx, cancel := context.WithCancel(context.Background())
	l := mustLock(t, c.Mutex("deferred"), ctx)
	cancel() // the request ended before the deferred Unlock ran
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock with an ended context: %v", err)
	}
	if n, _ := rdb.Exists(context.Background(), "dlock:deferred").Result(); n != 0 {
		t.Fatal("the key was left to expire")
	}
}

func TestTryLockOnDeadServerWrapsContext(t *testing.T) {
	srv, rdb := standalone(t)
	srv.Pause(t)
	defer srv.Resume(t)
	c := newClient(t, rdb)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	_, err := c.Mutex("x").TryLock(ctx)
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), srv.Addr) {
		t.Fatalf("TryLock on a hung server with a short ctx = %v, want DeadlineExceeded naming the node", err)
	}
}

func TestDoUnlocksWhenFnPanics(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	func() {
		defer func() {
			if recover() == nil {
				t.Error("the panic did not go on after Do")
			}
		}()
		_ = c.Mutex("p").Do(ctx, func(context.Context) error { panic("boom") })
	}()
	if l, err := newClient(t, rdb).Mutex("p").TryLock(ctx); err != nil {
		t.Fatalf("after fn panicked in Do, the lock is still held: %v", err)
	} else {
		_ = l.Unlock(ctx)
	}
}
