package dlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
)

// TestLastLocalWaiterWithdrawsStandingRequest: the local queue is by lock key, so a Mutex
// and an RWMutex writer of one name queue together in a process. When the Mutex waiter
// that made the process's standing request gives up, the writer behind it inherits the
// request; when that writer, the last local waiter, gives up too, it withdraws the
// request, which passes on a grant that landed meanwhile: the lock is free again at once,
// not kept for the grant's length (3s) by a request no one waits on.
func TestLastLocalWaiterWithdrawsStandingRequest(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 30*time.Second)
	const lockKey, asks = "dlock:mixed", "{dlock:mixed}:asks"
	holder := mustLock(t, newClient(t, rdb).Mutex("mixed"), ctx)
	defer holder.Unlock(ctx)

	a := newClient(t, rdb)
	m := a.Mutex("mixed")
	mctx, cancelM := context.WithCancel(ctx)
	defer cancelM()
	mutexDone := make(chan struct{})
	go func() {
		defer close(mutexDone)
		if l, err := m.Lock(mctx); err == nil {
			_ = l.Unlock(ctx)
		}
	}()
	waitFor(t, 5*time.Second, "the process's standing request", func() bool { return rdb.HLen(ctx, asks).Val() == 1 })

	wctx, cancelW := context.WithCancel(ctx)
	defer cancelW()
	writerDone := make(chan struct{})
	go func() {
		defer close(writerDone)
		if l, err := a.RWMutex("mixed").Lock(wctx); err == nil {
			_ = l.Unlock(ctx)
		}
	}()
	waitFor(t, 5*time.Second, "the writer to queue behind the Mutex waiter", func() bool { return dlock.LocalWaiters(m) == 2 })
	cancelM()
	<-mutexDone

	// The release grants the lock to the standing request, which no Lock of the process
	// takes (a writer does not ask with it).
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if v := rdb.Get(ctx, lockKey).Val(); v == "" || strings.HasPrefix(v, "turn:") {
		t.Fatalf("lock = %q after the release; want it granted to the standing request", v)
	}
	cancelW()
	<-writerDone

	other := newClient(t, rdb).Mutex("mixed")
	deadline := time.Now().Add(time.Second)
	for {
		l, err := other.TryLock(ctx)
		if err == nil {
			_ = l.Unlock(ctx)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the lock is still held (%q) 1s after the process's last waiter gave up: the grant to its standing request was not passed on (TryLock: %v)",
				rdb.Get(ctx, lockKey).Val(), err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
