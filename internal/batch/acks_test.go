package batch

import (
	"context"
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestAckedRoundTrip: a batcher made by NewAcked ends each round trip (single calls, a
// SendAll, calls whose script the server forgot) with one WAIT, whose reply every
// successful call carries; a call that failed carries none. Nothing goes outside a
// pipeline, where no WAIT could follow it.
func TestAckedRoundTrip(t *testing.T) {
	t.Parallel()
	master, rdb, cnt := start(t, nil)
	if err := rdb.ConfigSet(ctx, "repl-diskless-sync-delay", "0").Err(); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		replicas int
		acked    int64
	}{
		{"no replica", 1, 0},
		{"one replica", 1, 1},
		{"more than there are", 2, 1},
	} {
		if tc.acked > 0 && tc.replicas == 1 {
			redistest.StartReplica(t, master.Addr)
		}
		b := NewAcked(rdb, 1, Acks{Replicas: tc.replicas, Timeout: 500 * time.Millisecond})
		done := make(chan *Call, 4)
		b.Send(&Call{Script: incr, Keys: []string{"k"}, Args: []any{1}, Done: done})
		b.SendAll([]*Call{
			{Script: incr, Keys: []string{"k"}, Args: []any{1}, Done: done},
			{Script: incr, Keys: []string{"k"}, Args: []any{"not a number"}, Done: done},
		})
		if err := rdb.ScriptFlush(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		b.Send(&Call{Script: echo, Keys: []string{"k"}, Args: []any{7}, Done: done})
		for range 4 {
			c := wait(t, done, 10*time.Second)
			switch {
			case c.Err != nil && (c.Acked != 0 || c.AckErr != nil):
				t.Errorf("%s: a failed call carries an acknowledgement: %+v", tc.name, c)
			case c.Err == nil && (c.Acked != tc.acked || c.AckErr != nil):
				t.Errorf("%s: call %v: Acked %d, AckErr %v; want %d", tc.name, c.Args, c.Acked, c.AckErr, tc.acked)
			}
		}
		b.Stop()
	}
	if n := cnt.singles.Load(); n > 5 { // CONFIG SET and the SCRIPT FLUSHes
		t.Fatalf("%d commands outside a pipeline: a WAIT cannot follow them", n)
	}
}

// TestReloadSpacedOut: failed calls on a Cluster ask for a slot-map reload at most once per
// reloadInterval, and never for a context that ended or an error reply. Not parallel:
// the interval is the process's.
func TestReloadSpacedOut(t *testing.T) {
	cc := redistest.StartCluster(t, 3).Client(t)
	lastReload.Store(0)
	for _, tc := range []struct {
		name   string
		err    error
		reload bool
	}{
		{"a context cancelled", context.Canceled, false},
		{"a context deadline", fmt.Errorf("dial: %w", context.DeadlineExceeded), false},
		{"an error reply", redis.Nil, false},
		{"a connection failure", io.ErrUnexpectedEOF, true},
		{"a second failure at once", io.EOF, false},
	} {
		if got := reloadIf(cc, tc.err); got != tc.reload {
			t.Fatalf("%s: reloadIf = %v, want %v", tc.name, got, tc.reload)
		}
	}
	time.Sleep(reloadInterval + 50*time.Millisecond)
	if !reloadIf(cc, io.EOF) {
		t.Fatal("a failure after reloadInterval did not reload")
	}
}
