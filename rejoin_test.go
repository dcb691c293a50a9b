package dlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// A waiter whose id Redis remembers as served or gone (a grant to it lapsed before it
// heard of it, or its acquisition was undone) is refused with the gone reply, which no
// late request of that id can get past: the waiter asks again with a new id and is served.

// TestFairWaiterToldGoneAsksAnew: the FairMutex waiter's queue entry becomes a tombstone
// under it; its next refresh is told so, and it joins again with a new id and gets the
// lock once it is free.
func TestFairWaiterToldGoneAsksAnew(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	a, b := newClient(t, rdb), newClient(t, rdb)
	held, err := a.FairMutex("gone").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := b.FairMutex("gone").Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	const queue, deadlines = "{dlock:gone}:queue", "{dlock:gone}:queue:deadlines"
	var old string
	waitFor(t, 5*time.Second, "B queued", func() bool {
		old = rdb.LIndex(ctx, queue, 0).Val()
		return old != ""
	})
	// As a grant that lapsed unheard leaves it: out of the queue, a tombstone.
	rdb.LRem(ctx, queue, 0, old)
	rdb.ZAdd(ctx, deadlines, redis.Z{Score: -float64(time.Now().Add(time.Minute).UnixMilli()), Member: old})
	waitFor(t, 5*time.Second, "B queued again, with a new id", func() bool {
		id := rdb.LIndex(ctx, queue, 0).Val()
		return id != "" && id != old
	})
	servedAfter(t, ctx, held, got)
}

// TestMutexRequestToldDoneAsksAnew: a Mutex process's standing request, recorded as served
// or left under it, is refused; the process makes a new request, which stands and is
// granted on the holder's release.
func TestMutexRequestToldDoneAsksAnew(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	a, b := newClient(t, rdb), newClient(t, rdb)
	held := mustLock(t, a.Mutex("done"), ctx)
	got := make(chan *dlock.Lease, 1)
	go func() {
		l, err := b.Mutex("done").Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	const turns, asks = "{dlock:done}:turns", "{dlock:done}:asks"
	var id, ask string
	waitFor(t, 5*time.Second, "B standing", func() bool {
		id = rdb.LIndex(ctx, turns, 0).Val()
		ask = rdb.HGet(ctx, asks, id).Val()
		return ask != ""
	})
	// B's standing request is done, as a grant of it that lapsed unheard leaves it.
	fields := strings.Fields(ask) // token ttl reserve expires number
	rdb.HSet(ctx, asks, id+":done", fields[len(fields)-1])
	rdb.HDel(ctx, asks, id)
	rdb.LRem(ctx, turns, 0, id)
	waitFor(t, 5*time.Second, "B standing again, with a new request", func() bool {
		now := rdb.HGet(ctx, asks, id).Val()
		return now != "" && now != ask
	})
	servedAfter(t, ctx, held, got)
}

// servedAfter unlocks held and checks that the waiter whose lease comes on got is served
// within 5s, then unlocks its lease.
func servedAfter(t *testing.T, ctx context.Context, held *dlock.Lease, got <-chan *dlock.Lease) {
	t.Helper()
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-got:
		if l == nil {
			t.FailNow()
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the waiter was not served after it asked anew")
	}
}
