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
	rounds := int64(0)
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
		// A replica's acknowledgement can miss one WAIT's timeout on a loaded machine (a
		// count below the replicas there are): a round is tried again, three times at most.
		// A failed call carrying an acknowledgement, or a count above, fails at once.
		var short []string
		for try := 0; try < 3 && (try == 0 || len(short) > 0); try++ {
			short = ackedRound(t, rdb, tc.name, tc.replicas, tc.acked)
			rounds++
		}
		for _, s := range short {
			t.Error(s)
		}
	}
	if n := cnt.singles.Load(); n > 2+rounds { // CONFIG SET, a SCRIPT FLUSH per round, and the one slack there always was
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

// ackedRound sends a call, a SendAll and, after a SCRIPT FLUSH, a call through an acked
// batcher, and checks their acknowledgements against acked. It returns the calls
// acknowledged by fewer replicas than acked, and fails the test on anything else.
func ackedRound(t *testing.T, rdb *redis.Client, name string, replicas int, acked int64) (short []string) {
	t.Helper()
	b := NewAcked(rdb, 1, Acks{Replicas: replicas, Timeout: 500 * time.Millisecond})
	defer b.Stop()
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
			t.Errorf("%s: a failed call carries an acknowledgement: %+v", name, c)
		case c.Err == nil && c.AckErr == nil && c.Acked < acked:
			short = append(short, fmt.Sprintf("%s: call %v: Acked %d; want %d", name, c.Args, c.Acked, acked))
		case c.Err == nil && (c.Acked != acked || c.AckErr != nil):
			t.Errorf("%s: call %v: Acked %d, AckErr %v; want %d", name, c.Args, c.Acked, c.AckErr, acked)
		}
	}
	return short
}
