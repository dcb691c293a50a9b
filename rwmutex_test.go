package dlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

func rwScenario(t *testing.T, clients func() *dlock.Client) {
	ctx := ctxTimeout(t, 60*time.Second)
	rw := func() *dlock.RWMutex { return clients().RWMutex("doc") }

	// Four readers hold together.
	var readers []*dlock.Lease
	for range 4 {
		r, err := rw().RLock(ctx)
		if err != nil {
			t.Fatalf("RLock: %v", err)
		}
		readers = append(readers, r)
	}
	// A writer's TryLock fails; its Lock waits.
	if _, err := rw().TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("writer TryLock with readers in = %v", err)
	}
	writer := make(chan *dlock.Lease, 1)
	go func() {
		w, err := rw().Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		writer <- w
	}()
	// While it waits, a new reader's TryRLock fails (no writer starvation).
	waitFor(t, 10*time.Second, "the writer to wait", func() bool {
		l, err := rw().TryRLock(ctx)
		if err == nil {
			_ = l.Unlock(ctx) // the writer has not registered yet
		}
		return errors.Is(err, dlock.ErrNotAcquired)
	})
	select {
	case <-writer:
		t.Fatal("the writer got the lock while readers held it")
	case <-time.After(100 * time.Millisecond):
	}
	// The writer gets the lock when the readers leave.
	for _, r := range readers {
		if err := r.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	var w *dlock.Lease
	select {
	case w = <-writer:
	case <-time.After(10 * time.Second):
		t.Fatal("the writer did not get the lock after the readers left")
	}
	if w == nil {
		t.FailNow()
	}
	// Readers wait for the writer.
	reader := make(chan *dlock.Lease, 1)
	go func() {
		r, err := rw().RLock(ctx)
		if err != nil {
			t.Error(err)
		}
		reader <- r
	}()
	select {
	case <-reader:
		t.Fatal("a reader got in while the writer held the lock")
	case <-time.After(200 * time.Millisecond):
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case r := <-reader:
		if r != nil && r.Token() <= w.Token() {
			t.Fatalf("reader token %d not above writer token %d", r.Token(), w.Token())
		}
		_ = r.Unlock(ctx)
	case <-time.After(10 * time.Second):
		t.Fatal("the reader did not get in after the writer left")
	}
}

func TestRWMutex(t *testing.T) {
	_, rdb := standalone(t)
	rwScenario(t, func() *dlock.Client { return newClient(t, rdb) })
}

func TestRWMutexCluster(t *testing.T) {
	rdb := redistest.StartCluster(t, 3).Client(t)
	rwScenario(t, func() *dlock.Client { return newClient(t, rdb) })
}

func TestRWMutexQuorum(t *testing.T) {
	_, nodes, _ := quorumOf(t, 5)
	rwScenario(t, func() *dlock.Client { return newQuorumClient(t, nodes) })
}

func TestRWMutexDowngradeUpgradeReentry(t *testing.T) {
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	rw := c.RWMutex("doc")

	w, err := rw.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if again, err := rw.Lock(w.Context()); err != nil || again.Token() != w.Token() {
		t.Fatalf("write re-entry: %v", err)
	}
	// Downgrade: the writer takes the read lock, then leaves the write lock.
	r, err := rw.RLock(w.Context())
	if err != nil {
		t.Fatalf("downgrade: %v", err)
	}
	if err := w.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if r.Err() != nil {
		t.Fatalf("the downgraded read lease ended with the write lease: %v", r.Err())
	}
	if _, err := newClient(t, rdb).RWMutex("doc").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("a writer got in past a downgraded reader: %v", err)
	}
	if again, err := rw.RLock(r.Context()); err != nil || again.Token() != r.Token() {
		t.Fatalf("read re-entry: %v", err)
	}
	// Upgrade is refused at once, not a deadlock.
	start := time.Now()
	_, err = rw.Lock(r.Context())
	if err == nil || !strings.Contains(err.Error(), "upgrade") {
		t.Fatalf("upgrade = %v, want an error", err)
	}
	if time.Since(start) > time.Second {
		t.Fatalf("upgrade took %v to be refused", time.Since(start))
	}
	_ = r.Unlock(ctx)
}

func TestRWMutexDeadReaderEndsAlone(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 10*time.Second)
	dying := newClient(t, rdb).RWMutex("doc", dlock.TTL(300*time.Millisecond), dlock.NoRenew())
	living := newClient(t, rdb).RWMutex("doc", dlock.TTL(time.Second))
	short, err := dying.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	long, err := living.RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	before := long.ValidUntil()
	waitClosed(t, short.Done(), 5*time.Second, "the short reader's end")
	if short.Err() != dlock.ErrLost {
		t.Fatalf("short reader: %v", short.Err())
	}
	time.Sleep(time.Second)
	if long.Err() != nil || !long.ValidUntil().After(before) {
		t.Fatalf("the other reader: err %v, valid until %v (was %v)", long.Err(), long.ValidUntil(), before)
	}
	now, err := rdb.Time(ctx).Result()
	if err != nil {
		t.Fatal(err)
	}
	live, _ := rdb.ZCount(ctx, "{dlock:doc}:readers", strconv.FormatInt(now.UnixMilli(), 10), "+inf").Result()
	if live != 1 {
		t.Fatalf("%d live readers in Redis, want only the living one", live)
	}
	_ = long.Unlock(ctx)
}

func TestRWMutexWriterGivesUp(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 10*time.Second)
	c := newClient(t, rdb)
	r, err := c.RWMutex("doc").RLock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	wctx, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := newClient(t, rdb).RWMutex("doc").Lock(wctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("writer Lock = %v", err)
	}
	// The writer that gave up no longer keeps readers out.
	waitFor(t, 2*time.Second, "the writer's wait entry to go", func() bool {
		l, err := newClient(t, rdb).RWMutex("doc").TryRLock(ctx)
		if err == nil {
			_ = l.Unlock(ctx)
		}
		return err == nil
	})
	_ = r.Unlock(ctx)
}
