package scripts

import (
	"testing"
	"time"

	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestLateOwner: a Client's owner write that lands late never shortens the label a later
// write set, and writes it when it is missing or shorter.
func TestLateOwner(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	key := keyspace.OwnerKey("dlock:", "0123456789abcdef")
	land := func(life time.Duration) int64 {
		t.Helper()
		n, err := Owner.Run(ctx, rdb, []string{key}, "web-1:42", life.Milliseconds()).Int64()
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	pttl := func() time.Duration { return rdb.PTTL(ctx, key).Val() }

	if got := land(time.Minute); got != 1 || pttl() < 59*time.Second {
		t.Fatalf("first write: reply %d, PTTL %v; want 1 and about a minute", got, pttl())
	}
	if got := land(time.Hour); got != 1 || pttl() < 59*time.Minute {
		t.Fatalf("a longer write: reply %d, PTTL %v; want 1 and about an hour", got, pttl())
	}
	// The first write's copy lands late, after the longer one: it changes nothing.
	if got := land(time.Minute); got != 0 || pttl() < 59*time.Minute {
		t.Fatalf("late shorter write: reply %d, PTTL %v; want 0 and the hour kept", got, pttl())
	}
	if v := rdb.Get(ctx, key).Val(); v != "web-1:42" {
		t.Fatalf("owner = %q", v)
	}
	// The Client closes: its delete removes the label.
	if got := land(0); got != 1 || rdb.Exists(ctx, key).Val() != 0 {
		t.Fatalf("delete: reply %d, key exists %d; want 1 and gone", got, rdb.Exists(ctx, key).Val())
	}
	// A write sent before the delete lands after it: the label is back for its length
	// only.
	if got := land(time.Minute); got != 1 || rdb.Get(ctx, key).Val() != "web-1:42" || pttl() > time.Minute {
		t.Fatalf("late write after the delete: reply %d, PTTL %v; want 1 and at most a minute", got, pttl())
	}
}
