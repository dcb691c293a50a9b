package dlock_test

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// TestObserveIgnoresRenewals: where keyspace events are on, a leader's renewals (each a
// PEXPIRE, published as "expire") do not wake the observers: across several renewals an
// observer reads the election when the term would end unless renewed, not at each renewal, and
// sends nothing; it still sees a handover and, once a term expires, no leader, in time.
func TestObserveIgnoresRenewals(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithArgs("--notify-keyspace-events", "Kgx"))
	ctx := ctxTimeout(t, 30*time.Second)
	const ttl = 600 * time.Millisecond
	leaderHook, observerHook := &scriptHook{seen: map[string]int{}}, &scriptHook{seen: map[string]int{}}
	hooked := func(h *scriptHook) *dlock.Client {
		rdb := redis.NewClient(srv.Options())
		t.Cleanup(func() { _ = rdb.Close() })
		rdb.AddHook(h)
		return newClient(t, rdb)
	}
	leader, observer := hooked(leaderHook), hooked(observerHook)
	term, err := leader.Election("renewed", dlock.TTL(ttl)).Campaign(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	obs := observer.Election("renewed").Observe(ctx)
	until(t, obs, 2*time.Second, "the leader", valued("a"))

	reads, renewals := observerHook.count(scripts.ElectionRead), leaderHook.count(scripts.MutexExtend)
	select {
	case l := <-obs:
		t.Fatalf("observed %+v while the leader only renewed", l)
	case <-time.After(3 * time.Second):
	}
	reads = observerHook.count(scripts.ElectionRead) - reads
	renewals = leaderHook.count(scripts.MutexExtend) - renewals
	t.Logf("across %d renewals the observer read the election %d times", renewals, reads)
	// Its timer alone reads every 2/3 to 1 of a TTL, where the renewals come every 1/3:
	// about half as often; a wake-up per renewal reads at least once each.
	if renewals < 6 || 4*reads > 3*renewals {
		t.Fatalf("the observer read the election %d times across %d renewals: the renewals wake it", reads, renewals)
	}

	next := make(chan *dlock.Term, 1)
	go func() {
		term, err := newClient(t, srv.Client(t)).Election("renewed", dlock.TTL(ttl), dlock.NoRenew()).Campaign(ctx, "b")
		if err != nil {
			t.Error(err)
		}
		next <- term
	}()
	time.Sleep(100 * time.Millisecond) // the candidate waits
	if err := term.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	until(t, obs, time.Second, "the handover", valued("b"))
	<-next
	start := time.Now()
	until(t, obs, ttl+time.Second, "no leader once the term expired", noLeader)
	t.Logf("no leader observed %v after the handover was", time.Since(start))
}
