package dlock_test

import (
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// TestOwnerLabelNeverFails: an owner key that cannot be read (here not a string) costs
// the holder its owner name only: Inspect still reports the holder, and ForceUnlock,
// which removed the lock, says so rather than fail (an operator told it failed would
// force-unlock again, the next holder's lock).
func TestOwnerLabelNeverFails(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	c := newClient(t, rdb, dlock.WithOwner("host-a"))
	lease := mustLock(t, c.Mutex("label"), ctx)
	defer lease.Unlock(ctx)
	token := rdb.Get(ctx, "dlock:label").Val()
	id, ok := keyspace.ClientOf(token)
	if !ok {
		t.Fatalf("token %q names no Client", token)
	}
	owner := keyspace.OwnerKey("dlock:", id)
	rdb.Del(ctx, owner)
	rdb.HSet(ctx, owner, "not", "a string")
	info, err := c.Inspect(ctx, "label")
	if err != nil || len(info.Holders) != 1 || info.Holders[0].Owner != "" {
		t.Fatalf("Inspect: %+v, %v; want the holder, without an owner", info, err)
	}
	info, err = c.ForceUnlock(ctx, "label")
	if err != nil || len(info.Holders) != 1 {
		t.Fatalf("ForceUnlock: %+v, %v; want the holder it removed, no error", info, err)
	}
	if n := rdb.Exists(ctx, "dlock:label").Val(); n != 0 {
		t.Fatalf("the lock key is still there")
	}
}
