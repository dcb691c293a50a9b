package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// TestLateElectionWrites: the first copies of a Proclaim and of a campaign, held back (go-redis
// resends each on a new connection, and the resend succeeds), land after their term ended
// and after the next term began: they change neither the next leader's value nor any
// key's expiry (late_test.go's lateproxy; election_proclaim.lua's Late line).
func TestLateElectionWrites(t *testing.T) {
	srv, rdb := standalone(t)
	other := newClient(t, rdb, dlock.WithOwner("other"))
	a := newLateProcessRT(t, srv, 200*time.Millisecond)
	ctx := ctxTimeout(t, 30*time.Second)
	const ttl = 2 * time.Second
	const key, record = "dlock:late-e", "{dlock:late-e}:leader"

	ta, err := a.Election("late-e", dlock.TTL(ttl)).Campaign(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	proclaim, proclaimed := a.hold(t, func() error { return ta.Proclaim(ctx, "stale") })
	t.Logf("Proclaim, held back: %v", <-proclaimed)
	if err := ta.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	// A second term of a's, whose campaign's first copy is held back.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	hold := a.Election("late-e", dlock.TTL(ttl))
	campaign, campaigned := a.hold(t, func() error {
		tc, err := hold.TryCampaign(short, "campaign")
		if err == nil {
			_ = tc.Unlock(ctx)
		}
		return err
	})
	t.Logf("TryCampaign, held back: %v", <-campaigned)

	tb, err := other.Election("late-e", dlock.TTL(ttl)).Campaign(ctx, "b1")
	if err != nil {
		t.Fatal(err)
	}
	land(t, proclaim)
	land(t, campaign)
	l, err := other.Election("late-e").Leader(ctx)
	if err != nil || l.Value != "b1" || l.Owner != "other" || l.Token != tb.Token() {
		t.Fatalf("after the late writes Leader = %+v, %v; want b1 by other with token %d", l, err, tb.Token())
	}
	for _, k := range []string{key, record} {
		if left := rdb.PTTL(ctx, k).Val(); left > ttl {
			t.Errorf("%s lives %v, above the TTL: a late write lengthened it", k, left)
		}
	}
	if err := tb.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if v, err := rdb.Get(ctx, key).Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("after the next term resigned the lock holds %q", v)
	}
}
