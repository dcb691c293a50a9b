package batch

import (
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestNoScriptNeverRunsBehindLaterCalls: a pipeline in which the server, its script cache
// flushed, answers NOSCRIPT to one call and runs a call written behind it (whose script it
// had loaded again meanwhile) must not run the first call afterwards: that call may be an
// acquisition whose caller gave up, and the one behind it its undo. It fails unsent; a
// call answered NOSCRIPT after the last call that ran is sent again, as before.
func TestNoScriptNeverRunsBehindLaterCalls(t *testing.T) {
	t.Parallel()
	_, rdb, _ := start(t, nil)
	b := New(rdb, 1)
	defer b.Stop()
	done := make(chan *Call, 3)
	// Both scripts sent once, so that the batcher sends EVALSHA from now on.
	for _, s := range []*redis.Script{incr, echo} {
		b.Send(&Call{Script: s, Keys: []string{"k"}, Args: []any{1}, Done: done})
		if c := wait(t, done, 10*time.Second); c.Err != nil {
			t.Fatal(c.Err)
		}
	}
	// The cache flushed, and echo alone loaded again.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if err := echo.Load(ctx, rdb).Err(); err != nil {
		t.Fatal(err)
	}
	b.SendAll([]*Call{
		{Script: incr, Keys: []string{"k"}, Args: []any{10}, Done: done},  // NOSCRIPT
		{Script: echo, Keys: []string{"k"}, Args: []any{7}, Done: done},   // runs
		{Script: incr, Keys: []string{"k"}, Args: []any{100}, Done: done}, // NOSCRIPT, last
	})
	got := map[any]*Call{}
	for range 3 {
		c := wait(t, done, 10*time.Second)
		got[c.Args[0]] = c
	}
	if c := got[10]; !errors.Is(c.Err, errNotResent) {
		t.Errorf("the call before one that ran: %d, %v; want errNotResent", c.Val, c.Err)
	}
	if c := got[7]; c.Err != nil || c.Val != 7 {
		t.Errorf("the call that ran: %d, %v", c.Val, c.Err)
	}
	if c := got[100]; c.Err != nil || c.Val != 101 {
		t.Errorf("the last call, sent again: %d, %v; want 101", c.Val, c.Err)
	}
	if v, _ := rdb.Get(ctx, "k").Int(); v != 101 {
		t.Errorf("k = %d, want 101: the call not resent must not have run", v)
	}
}
