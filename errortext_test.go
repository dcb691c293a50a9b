package dlock_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// onePrefix fails the test unless err's text says "dlock: " exactly once.
func onePrefix(t *testing.T, what string, err error) {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: no error", what)
	}
	if n := strings.Count(err.Error(), "dlock: "); n != 1 {
		t.Errorf("%s: %q says \"dlock: \" %d times, want once", what, err, n)
	}
}

// TestErrorTextOnePrefix: every error the API returns wraps its sentinel and reads with
// one "dlock: ".
func TestErrorTextOnePrefix(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	check := func(what string, err error, sentinel error) {
		t.Helper()
		t.Logf("%s: %v", what, err)
		onePrefix(t, what, err)
		if !errors.Is(err, sentinel) {
			t.Errorf("%s: %v does not wrap %v", what, err, sentinel)
		}
	}

	l := mustLock(t, c.Mutex("y"), ctx)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	err := l.Unlock(ctx)
	check("second Unlock", err, dlock.ErrNotHeld)
	check("second Unlock", err, dlock.ErrReleased)
	check("Extend after Unlock", l.Extend(ctx, time.Second), dlock.ErrNotHeld)

	held := mustLock(t, c.Mutex("held"), ctx)
	other := newClient(t, rdb)
	_, err = other.Mutex("held").TryLock(ctx)
	check("TryLock refused", err, dlock.ErrNotAcquired)
	_, err = c.Mutex("held").TryLock(ctx)
	check("TryLock refused in this process", err, dlock.ErrNotAcquired)
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	_, err = other.Mutex("held").Lock(short)
	check("Lock gave up by ctx", err, context.DeadlineExceeded)
	_ = held.Unlock(ctx)

	lost := mustLock(t, c.Mutex("lost", dlock.TTL(time.Second)), ctx)
	if err := rdb.Del(ctx, "dlock:lost").Err(); err != nil {
		t.Fatal(err)
	}
	check("Extend after loss", lost.Extend(ctx, time.Second), dlock.ErrLost)
	check("Unlock after loss", lost.Unlock(ctx), dlock.ErrLost)

	live := mustLock(t, c.Mutex("live"), ctx)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	_, err = c.Mutex("x").Lock(ctx)
	check("Lock after Close", err, dlock.ErrClosed)
	check("Extend after Close", live.Extend(ctx, time.Second), dlock.ErrClosed)
	check("Unlock after Close", live.Unlock(ctx), dlock.ErrClosed)
}

// TestErrorTextClosedPort: a node on a port nobody listens on is reported with the cause
// go-redis knows (connection refused), not as silence.
func TestErrorTextClosedPort(t *testing.T) {
	port, err := redistest.ReservePort()
	if err != nil {
		t.Fatal(err)
	}
	defer redistest.ReleasePort(port)
	rdb := redis.NewClient(&redis.Options{Addr: fmt.Sprintf("127.0.0.1:%d", port), MaxRetries: -1})
	defer rdb.Close()
	c := newClient(t, rdb)
	_, err = c.Mutex("x", dlock.TTL(time.Second)).TryLock(ctxTimeout(t, 5*time.Second))
	t.Logf("closed port: %v", err)
	onePrefix(t, "closed port", err)
	if !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("error %q does not say the connection was refused", err)
	}
}

// TestErrorTextKindOnAnotherKind: a Semaphore on a Mutex's name says what the key is and
// what to do, not the script's line.
func TestErrorTextKindOnAnotherKind(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	l := mustLock(t, c.Mutex("shared"), ctx)
	defer l.Unlock(ctx)
	_, err := c.Semaphore("shared", 3).TryAcquire(ctx, 1)
	t.Logf("Semaphore on a Mutex: %v", err)
	onePrefix(t, "Semaphore on a Mutex", err)
	for _, want := range []string{"another name", "WithPrefix"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	for _, bad := range []string{"f_", "@user_script"} {
		if strings.Contains(err.Error(), bad) {
			t.Errorf("error %q shows the script's %q", err, bad)
		}
	}
}

// TestNewLogsOptionError: New reports an invalid option once through the Client's logger,
// and every call returns it.
func TestNewLogsOptionError(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	_, rdb := standalone(t)
	c := newClient(t, rdb, dlock.WithLogger(log), dlock.WithDriftFactor(2))
	if n := strings.Count(buf.String(), "drift factor"); n != 1 {
		t.Fatalf("log %q: the option's error logged %d times at New, want once", buf.String(), n)
	}
	_, err := c.Mutex("x").TryLock(context.Background())
	if err == nil || !strings.Contains(err.Error(), "drift factor") {
		t.Fatalf("TryLock = %v, want the option's error", err)
	}
	if n := strings.Count(buf.String(), "drift factor"); n != 1 {
		t.Fatalf("log %q: the option's error logged again by a call", buf.String())
	}
}

// TestCloseEndsEveryWait: every call a Close ends, or finds done, says ErrClosed: waits of
// every kind, attempts after it, and the calls its transport refused unsent.
func TestCloseEndsEveryWait(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 10*time.Second)
	holder := newClient(t, rdb)
	full, err := holder.Semaphore("sem", 1).Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer full.Unlock(ctx)
	fair, err := holder.FairMutex("fair").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer fair.Unlock(ctx)
	w, err := holder.RWMutex("rw").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Unlock(ctx)

	c := dlock.New(rdb)
	waits := map[string]func() error{
		"Semaphore.Acquire": func() error { _, err := c.Semaphore("sem", 1).Acquire(ctx, 1); return err },
		"RWMutex.RLock":     func() error { _, err := c.RWMutex("rw").RLock(ctx); return err },
		"RWMutex.Lock":      func() error { _, err := c.RWMutex("rw").Lock(ctx); return err },
		"FairMutex.Lock":    func() error { _, err := c.FairMutex("fair").Lock(ctx); return err },
	}
	errs := make(map[string]chan error)
	for what, wait := range waits {
		ch := make(chan error, 1)
		errs[what] = ch
		go func() { ch <- wait() }()
	}
	time.Sleep(100 * time.Millisecond)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for what, ch := range errs {
		err := <-ch
		onePrefix(t, what+" ended by Close", err)
		if !errors.Is(err, dlock.ErrClosed) {
			t.Errorf("%s ended by Close = %v, want ErrClosed", what, err)
		}
	}
	_, err = c.Semaphore("sem2", 2).TryAcquire(ctx, 1)
	if !errors.Is(err, dlock.ErrClosed) {
		t.Errorf("TryAcquire after Close = %v, want ErrClosed", err)
	}
	// A call the transport refused unsent, as a renewal, an Extend or an Unlock in flight
	// during Close gets it: the node's error is ErrClosed itself.
	refused := &dlock.QuorumError{Op: "unlock", Name: "x", Total: 1, Needed: 1,
		Nodes: []*dlock.NodeError{{Addr: "127.0.0.1:6379", Err: batch.ErrStopped}}}
	onePrefix(t, "a call refused unsent", refused)
	if !errors.Is(refused, dlock.ErrClosed) {
		t.Errorf("a call refused unsent: %v, want ErrClosed", refused)
	}
}

// TestErrorTextHungServer: a server that takes connections but answers nothing is said to
// be hung or slow, not possibly down.
func TestErrorTextHungServer(t *testing.T) {
	srv, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	mustLock(t, c.Mutex("warm"), ctx) // a connection and the scripts, before the pause
	srv.Pause(t)
	defer srv.Resume(t)
	_, err := c.Mutex("x", dlock.TTL(300*time.Millisecond)).TryLock(ctx)
	t.Logf("hung server: %v", err)
	onePrefix(t, "hung server", err)
	if !strings.Contains(err.Error(), "accepts connections (hung or slow)") {
		t.Fatalf("error %q does not say the server accepts connections", err)
	}
}
