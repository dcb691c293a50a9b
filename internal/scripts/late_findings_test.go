//go:build latefindings

package scripts

import (
	"strings"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// Late landings that still harm. Each test asserts the rule ("a call that lands late can
// never harm") and so FAILS while the harm is there: run them with
//
//	go test -tags latefindings -run TestLateFinding ./internal/scripts/

// TestLateFindingForceUnlockRemovesLaterHolder: a ForceUnlock that lands after its caller
// gave up removes a lease taken after that (the operator meant the holder it saw).
func TestLateFindingForceUnlockRemovesLaterHolder(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "finding:force")
	got, err := acquire(rdb, k, tokenA, time.Minute) // the stuck holder the operator saw
	must(t, got, err, 1)
	rdb.Del(ctx, k.Lock)                            // it expired; the operator's call timed out
	got, err = acquire(rdb, k, tokenB, time.Minute) // a new holder
	must(t, got, err, 2)
	if err := ForceUnlock.Run(ctx, rdb, lockKeys8(k), 100, k.Channel, "PUBLISH", k.GrantedPrefix()).Err(); err != nil {
		t.Fatal(err)
	}
	if v := rdb.Get(ctx, k.Lock).Val(); v != tokenB {
		t.Fatalf("lock = %q: the late ForceUnlock removed the lease taken after it gave up", v)
	}
}

// TestLateFindingStampReleaseSameMillisecond: a TimestampMutex release that lands after a
// later hold wrote the very same deadline (acquired within the millisecond of the
// release, with the same lease length) deletes that live hold's key.
func TestLateFindingStampReleaseSameMillisecond(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "finding:stamp")
	now := time.Now().UnixMilli()
	deadline := now + 30_000
	// The release of hold 1 (deadline written at now) is sent; hold 2 acquires in the same
	// millisecond, and its acquire lands first.
	got, err := stampAcq(rdb, k, now, deadline, 30*time.Second)
	must(t, got, err, 1)
	got, err = stampRel(rdb, k, "PUBLISH", deadline) // hold 1's release, landing late
	must(t, got, err, 0)
}

// TestLateFindingMutexDoneRequestTakesFreeLock: a Mutex attempt of a standing request that
// was served or left (mutex_asks.lua), landing when the key is free, takes the lock for
// its lease length, though its request stands no more and no one waits with its token:
// mutex_acquire.lua looks the request up only after SET NX. The leave, or the release of
// the served request's hold, landed before it, so nothing undoes it; and taking it, the
// attempt takes the process out of the turns, deleting a newer request of the process.
func TestLateFindingMutexDoneRequestTakesFreeLock(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	t.Run("after its leave", func(t *testing.T) {
		r := &lateRig{rdb: rdb, k: keys(t, "finding:mutex-done:1")}
		r.setLong(t, r.k.Lock, tokenB)
		r.waitingAs(t, tokenA, "p1", "1")
		got, err := r.mutexLeave("p1", tokenA, "1") // p1 gives up
		must(t, got, err, 0)
		r.rdb.Del(ctx, r.k.Lock)                 // the holder's lease ran out
		got, err = r.mutexAsk(tokenA, "p1", "1") // p1's attempt, landing late
		if err != nil || !Gone(got) {
			t.Errorf("late attempt = %d, %v; want the gone reply", got, err)
		}
		r.wantGone(t, r.k.Lock)
	})
	t.Run("after its request was granted, used and released", func(t *testing.T) {
		r := &lateRig{rdb: rdb, k: keys(t, "finding:mutex-done:2")}
		r.setLong(t, r.k.Lock, tokenB)
		r.waitingAs(t, tokenA, "p1", "1")
		got, err := r.mutexRelease(tokenB) // grants p1's request
		must(t, got, err, 1)
		got, err = r.mutexAsk(tokenA, "p1", "1") // p1 confirms, holds, releases
		must(t, got, err, 2)
		got, err = r.mutexRelease(tokenA)
		must(t, got, err, 1)
		got, err = r.mutexAsk(tokenA, "p1", "1") // an earlier attempt of it, landing late
		if err != nil || !Gone(got) {
			t.Errorf("late attempt = %d, %v; want the gone reply", got, err)
		}
		r.wantGone(t, r.k.Lock)
	})
	t.Run("after its leave, a newer request of the process stands", func(t *testing.T) {
		r := &lateRig{rdb: rdb, k: keys(t, "finding:mutex-done:3")}
		r.setLong(t, r.k.Lock, tokenB)
		r.waitingAs(t, tokenA, "p1", "1")
		got, err := r.mutexLeave("p1", tokenA, "1")
		must(t, got, err, 0)
		r.waitingAs(t, tokenC, "p1", "2") // a newer waiter of p1
		r.rdb.Del(ctx, r.k.Lock)          // the holder's lease ran out
		got, err = r.mutexAsk(tokenA, "p1", "1")
		if err != nil || !Gone(got) {
			t.Errorf("late attempt = %d, %v; want the gone reply", got, err)
		}
		turns, ask := r.rdb.LRange(ctx, r.k.Turns, 0, -1).Val(), r.rdb.HGet(ctx, r.k.Asks, "p1").Val()
		if len(turns) != 1 || turns[0] != "p1" || !strings.HasPrefix(ask, tokenC+" ") {
			t.Errorf("turns %v, p1's request %q: the newer waiter's request and place are gone", turns, ask)
		}
		r.wantGone(t, r.k.Lock)
	})
}

// TestLateFindingMutexDoneRequestTakesTurn: likewise, a turn promised to the process (to
// a newer waiter of it, whose request lapsed) is taken by a late attempt of a request that
// left, for the attempt's lease length; the newer waiter, asking with its own token, is
// then refused until that runs out.
func TestLateFindingMutexDoneRequestTakesTurn(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	r := &lateRig{rdb: rdb, k: keys(t, "finding:mutex-turn")}
	r.setLong(t, r.k.Lock, tokenB)
	r.waitingAs(t, tokenA, "p1", "1")
	got, err := r.mutexLeave("p1", tokenA, "1") // p1's first waiter gives up
	must(t, got, err, 0)
	r.waitingAs(t, tokenC, "p1", "2")                      // a newer waiter of p1
	r.rdb.HSet(ctx, r.k.Asks, "p1", tokenC+" 60000 1 1 2") // its request lapsed
	got, err = r.mutexRelease(tokenB)                      // promises p1 the turn
	must(t, got, err, 1)
	got, err = r.mutexAsk(tokenA, "p1", "1") // the first waiter's attempt, landing late
	if err != nil || !Gone(got) {
		t.Errorf("late attempt = %d, %v; want the gone reply", got, err)
	}
	r.wantValue(t, r.k.Lock, "turn:p1")
	got, err = r.mutexAsk(tokenC, "p1", "2") // the newer waiter takes its turn
	if err != nil || got <= 0 {
		t.Fatalf("the newer waiter's attempt on its process's turn = %d, %v; want it acquired", got, err)
	}
}
