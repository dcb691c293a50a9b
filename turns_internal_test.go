package dlock

import (
	"context"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

func internalScriptCalls(t *testing.T, rdb *redis.Client) int {
	t.Helper()
	total := 0
	for _, line := range strings.Split(rdb.Info(context.Background(), "commandstats").Val(), "\n") {
		if !strings.HasPrefix(line, "cmdstat_evalsha:") && !strings.HasPrefix(line, "cmdstat_eval:") {
			continue
		}
		for _, f := range strings.Split(strings.SplitN(line, ":", 2)[1], ",") {
			if v, ok := strings.CutPrefix(f, "calls="); ok {
				n, _ := strconv.Atoi(strings.TrimSpace(v))
				total += n
			}
		}
	}
	return total
}

func internalWaitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(2 * time.Millisecond)
	}
}

// TestStaleLeaveKeepsNewerAsk: the leave that lock() sends (without waiting) for a last
// local waiter that gave up may reach Redis after a new Lock of the same process has
// joined the turns with a new standing request. The leave names the old request's token,
// so it leaves the new one in place, and the release grants it.
func TestStaleLeaveKeepsNewerAsk(t *testing.T) {
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()

	q, p := New(rdb), New(rdb)
	defer q.Close()
	defer p.Close()
	held, err := q.Mutex("lv", TTL(5*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	pm := p.Mutex("lv")
	base := internalScriptCalls(t, rdb)
	got := make(chan *Lease, 1)
	go func() {
		l, err := pm.Lock(ctx)
		if err != nil {
			t.Error(err)
		}
		got <- l
	}()
	// Refused, listening, refused again (after subscribing): it now waits.
	internalWaitFor(t, "P's two attempts", func() bool { return internalScriptCalls(t, rdb) >= base+2 })
	if n := rdb.LLen(ctx, "{dlock:lv}:turns").Val(); n != 1 {
		t.Fatalf("turn list has %d entries, want P", n)
	}

	// The leave of an earlier last waiter of P (ask token "old"), overtaken by the new
	// waiter's attempt.
	pm.t.leaveTurns("old-ask-token")
	internalWaitFor(t, "the stale leave to run", func() bool { return internalScriptCalls(t, rdb) >= base+3 })
	if n := rdb.LLen(ctx, "{dlock:lv}:turns").Val(); n != 1 {
		t.Fatalf("turn list has %d entries after the stale leave, want P still", n)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-got
	if l == nil {
		t.FailNow()
	}
	_ = l.Unlock(ctx)
}
