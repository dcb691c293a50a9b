package dlock_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestGrantAfterUndoneAttempt: an attempt of a waiting process P times out (server
// stalled) just as a release grants P's standing request. Were the attempt undone
// (releaseAbandoned of the request's token), the undo would run after the grant and pass
// the lock on to R, while the grant message still reached P, whose Lock would return a
// lease beside R's. A standing request's token is therefore never undone: P's lease must
// be genuine (the key holds its token). Timing-based: it skips when the stall misses.
//
// Server order after the stall: Q's release (grant X to P), P's A2 (X: own token),
// [formerly P's undo of A2 (release X: passes the lock to R)], P's A3.
func TestGrantAfterUndoneAttempt(t *testing.T) {
	srv := redistest.Start(t, redistest.WithArgs("--enable-debug-command", "yes"))
	rdb := srv.Client(t)
	ctx := ctxTimeout(t, 20*time.Second)
	const lockKey, asks, turns, channel = "dlock:k", "{dlock:k}:asks", "{dlock:k}:turns", "{dlock:k}:released"

	q, p, r := newClient(t, rdb), newClient(t, rdb), newClient(t, rdb)
	hq := mustLock(t, q.Mutex("k", dlock.TTL(10*time.Second), dlock.NoRenew()), ctx)
	// P's attempts will be told the holder has 200ms left: its next attempt comes then.
	base := scriptCalls(t, rdb)
	rdb.PExpire(ctx, lockKey, 200*time.Millisecond)
	tPexpire := time.Now()

	type result struct {
		l   *dlock.Lease
		err error
		at  time.Time
	}
	pGot := make(chan result, 1)
	go func() {
		l, err := p.Mutex("k", dlock.TTL(1500*time.Millisecond)).Lock(ctx)
		pGot <- result{l, err, time.Now()}
	}()
	waitFor(t, 5*time.Second, "P subscribed", func() bool {
		return rdb.PubSubNumSub(ctx, channel).Val()[channel] >= 1 && rdb.HLen(ctx, asks).Val() == 1
	})
	var askX string
	for _, v := range rdb.HGetAll(ctx, asks).Val() {
		askX = strings.Fields(v)[0]
	}
	// P's second attempt (right after subscribing) is in: it was told ~200ms as well.
	waitFor(t, 5*time.Second, "P's second attempt", func() bool { return scriptCalls(t, rdb) >= base+2 })
	rdb.PExpire(ctx, lockKey, 10*time.Second)

	rGot := make(chan result, 1)
	go func() {
		l, err := r.Mutex("k", dlock.TTL(3*time.Second)).Lock(ctx)
		rGot <- result{l, err, time.Now()}
	}()
	waitFor(t, 5*time.Second, "R in the turn list", func() bool { return rdb.LLen(ctx, turns).Val() == 2 })

	// Stall the server from just before P's next attempt (~200ms after the PEXPIRE) until
	// after that attempt has timed out on P's side (nodeTimeout = 500ms for a 1.5s TTL).
	time.Sleep(time.Until(tPexpire.Add(140 * time.Millisecond)))
	stall := srv.Client(t)
	go func() { stall.Do(context.Background(), "DEBUG", "SLEEP", "0.68") }()
	time.Sleep(20 * time.Millisecond)
	go func() { _ = hq.Unlock(ctx) }() // queued ahead of P's attempt

	pr := <-pGot
	if pr.err != nil {
		t.Fatalf("P: %v", pr.err)
	}
	owner := rdb.Get(ctx, lockKey).Val()
	pValid := pr.l.Err() == nil && time.Until(pr.l.ValidUntil()) > 0
	t.Logf("P returned at %v: owner %q, ask %s, valid %v, err %v", pr.at.Sub(tPexpire), owner, askX, pValid, pr.l.Err())
	var rr result
	select {
	case rr = <-rGot:
	case <-time.After(2 * time.Second):
		// P acquired legitimately: the server did not run the calls in the order this
		// test arranges (it is timing-based; run it on its own).
		_ = pr.l.Unlock(ctx)
		rr = <-rGot
		if rr.err == nil {
			_ = rr.l.Unlock(ctx)
		}
		t.Skip("interleaving not reproduced this run (P's lease was genuine)")
	}
	if rr.err != nil {
		t.Fatalf("R: %v", rr.err)
	}
	t.Logf("P's ask token %s; P got its lease at %v, R at %v", askX, pr.at.Sub(tPexpire), rr.at.Sub(tPexpire))
	t.Logf("key owner when P's Lock returned %q; P lease then: valid=%v validFor=%v; R lease: err=%v", owner, pValid, time.Until(pr.l.ValidUntil()), rr.l.Err())
	waitClosed(t, pr.l.Done(), 5*time.Second, "P's lease to end")
	t.Logf("P's lease ended: %v", context.Cause(pr.l.Context()))
	if owner != askX && rr.l.Err() == nil {
		t.Errorf("P's Lock returned a lease for token %s (valid for %v when returned) while the key held %q and R's Lock returned too; P's lease is then lost by its first renewal",
			askX, pr.l.ValidUntil().Sub(pr.at).Round(time.Millisecond), owner)
	}
	_ = rr.l.Unlock(ctx)
}
