package dlock_test

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/lateproxy"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// The FairMutex's waiters of one Client hear their grants on one channel, and register on
// it before their first attempt when it is subscribed already (fair.go grantChannel,
// wait.go listenFirst). These tests attack that: mixed owned and unowned Clients, a
// waiter that gives up as it is granted, a late first attempt, a pub/sub reconnect.

// grantLiveness bounds how long a granted waiter may take to hold the lock: a grant it
// did not hear is confirmed by its next refresh (within a second), plus room for a slow
// machine.
const grantLiveness = 3 * time.Second

// exclusive counts the holders of one lock in a test.
type exclusive struct{ n atomic.Int32 }

// hold holds the lock as who for d, and fails the test if someone else holds it too.
func (e *exclusive) hold(t *testing.T, who string, d time.Duration) {
	t.Helper()
	if n := e.n.Add(1); n != 1 {
		t.Errorf("%s holds the lock with %d other holder(s)", who, n-1)
	}
	time.Sleep(d)
	e.n.Add(-1)
}

// TestFairGrantsInOrderAcrossOwnedAndUnownedClients: waiters of two owned Clients (a
// channel each, shared by the Client's waiters, the later ones registered before their
// first attempt) and of an unowned one (a channel per waiter) queue alternately on one
// lock; each is granted in its turn, alone, with a growing fencing token, and soon.
func TestFairGrantsInOrderAcrossOwnedAndUnownedClients(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T) redis.UniversalClient { _, rdb := standalone(t); return rdb }},
		{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.StartCluster(t, 3).Client(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fairMixedOwners(t, tc.start(t))
		})
	}
}

func fairMixedOwners(t *testing.T, rdb redis.UniversalClient) {
	ctx := ctxTimeout(t, 60*time.Second)
	const name = "grant-channel-mixed"
	a, b, c := newClient(t, rdb), newClient(t, rdb, dlock.WithOwner("")), newClient(t, rdb)
	waiters := []*dlock.Client{a, b, a, c, a, b, c, a}
	holder, err := newClient(t, rdb).FairMutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var (
		ex       exclusive
		mu       sync.Mutex
		order    []int
		tokens   = []uint64{holder.Token()}
		released = time.Now()
		slowest  time.Duration
		wg       sync.WaitGroup
	)
	for i, cl := range waiters {
		wg.Go(func() {
			l, err := cl.FairMutex(name).Lock(ctx)
			if err != nil {
				t.Errorf("waiter %d: %v", i, err)
				return
			}
			mu.Lock()
			order, tokens = append(order, i), append(tokens, l.Token())
			slowest = max(slowest, time.Since(released))
			mu.Unlock()
			ex.hold(t, fmt.Sprintf("waiter %d", i), 10*time.Millisecond)
			mu.Lock()
			released = time.Now()
			mu.Unlock()
			if err := l.Unlock(ctx); err != nil {
				t.Errorf("waiter %d: %v", i, err)
			}
		})
		waitUntil(t, 5*time.Second, fmt.Sprintf("waiter %d queued", i), fairQueued(rdb, name, int64(i+1)))
	}
	mu.Lock()
	released = time.Now()
	mu.Unlock()
	if err := holder.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	t.Logf("slowest grant: %v after the release before it", slowest.Round(time.Millisecond))
	for i, got := range order {
		if got != i {
			t.Fatalf("granted in order %v, want 0..%d", order, len(waiters)-1)
		}
	}
	for i := 1; i < len(tokens); i++ {
		if tokens[i] <= tokens[i-1] {
			t.Fatalf("fencing tokens %v do not grow", tokens)
		}
	}
	if slowest > grantLiveness {
		t.Errorf("a grant took %v to be held, want under %v", slowest, grantLiveness)
	}
}

// TestFairWaiterGivingUpAsGrantedPassesOn: two waiters of one Client on one lock, hearing
// their grants on one channel; the first gives up about when the holder's release grants
// it. Whether it took the grant (then unlocked) or left, the second is granted next,
// never while the first holds, with a larger fencing token, and soon.
func TestFairWaiterGivingUpAsGrantedPassesOn(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	holder, a := newClient(t, rdb), newClient(t, rdb)
	for _, tc := range []struct {
		name   string
		offset time.Duration // of the give-up after the release; < 0 before it
	}{
		{"just before", -time.Millisecond},
		{"with", 0},
		{"just after", time.Millisecond},
		{"after", 3 * time.Millisecond},
		{"later", 10 * time.Millisecond},
	} {
		t.Run(tc.name, func(t *testing.T) {
			giveUpAsGranted(t, rdb, holder, a, "grant-channel-giveup-"+tc.name, tc.offset)
		})
	}
}

func giveUpAsGranted(t *testing.T, rdb redis.UniversalClient, holder, a *dlock.Client, name string, offset time.Duration) {
	ctx := ctxTimeout(t, 30*time.Second)
	first, err := holder.FairMutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var ex exclusive
	ctx1, giveUp := context.WithCancel(ctx)
	defer giveUp()
	w1 := make(chan uint64, 1) // its fencing token, 0 if it gave up
	go func() {
		l, err := a.FairMutex(name).Lock(ctx1)
		if err != nil {
			w1 <- 0
			return
		}
		ex.hold(t, "w1", 20*time.Millisecond)
		_ = l.Unlock(ctx)
		w1 <- l.Token()
	}()
	waitUntil(t, 5*time.Second, "w1 queued", fairQueued(rdb, name, 1))
	type held struct {
		l  *dlock.Lease
		at time.Time
	}
	w2 := make(chan held, 1)
	go func() {
		l, err := a.FairMutex(name).Lock(ctx)
		at := time.Now()
		if err != nil {
			t.Errorf("w2: %v", err)
		}
		if l != nil {
			ex.hold(t, "w2", 20*time.Millisecond)
		}
		w2 <- held{l, at}
	}()
	waitUntil(t, 5*time.Second, "w2 queued", fairQueued(rdb, name, 2))
	if offset < 0 {
		giveUp()
	}
	go func() { _ = first.Unlock(ctx) }()
	time.Sleep(max(offset, 0))
	giveUp()
	tok1 := <-w1
	settled := time.Now()
	select {
	case h := <-w2:
		l := h.l
		if l == nil {
			return
		}
		t.Logf("w1 %s; w2 granted %v after", map[bool]string{true: "held and unlocked", false: "gave up"}[tok1 != 0],
			h.at.Sub(settled).Round(time.Millisecond))
		if l.Token() <= max(tok1, first.Token()) {
			t.Errorf("w2's fencing token %d, not above the holder's %d and w1's %d", l.Token(), first.Token(), tok1)
		}
		_ = l.Unlock(ctx)
	case <-time.After(grantLiveness):
		t.Fatalf("w2 not granted within %v of w1's end", grantLiveness)
	}
}

// TestFairGrantAfterPubSubReconnect: a Client whose grant channel is subscribed (lingering)
// loses its connections; a waiter of it registers on the channel before its first attempt
// while the subscription may not be back yet. A grant published then is heard when the
// channel is subscribed again, or confirmed by the next refresh: within a second.
func TestFairGrantAfterPubSubReconnect(t *testing.T) {
	t.Parallel()
	srv, rdb := standalone(t)
	p, prdb := behindProxy(t, srv, *srv.Options())
	holder, a := newClient(t, rdb), newClient(t, prdb)
	ctx := ctxTimeout(t, 60*time.Second)
	const name = "grant-channel-reconnect"
	lease, err := holder.FairMutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A wait that gives up leaves a's grant channel subscribed, lingering.
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	_, err = a.FairMutex(name).Lock(short)
	cancel()
	if err == nil {
		t.Fatal("a took a held lock")
	}
	var slowest time.Duration
	// Cuts long enough for the pub/sub reader's back-off to grow to its second.
	for round, cut := range []time.Duration{0, 50 * time.Millisecond, 400 * time.Millisecond, 1500 * time.Millisecond} {
		p.Cut(t)
		time.Sleep(cut)
		p.Restore(t)
		done := make(chan *dlock.Lease, 1)
		go func() {
			l, err := a.FairMutex(name).Lock(ctx)
			if err != nil {
				t.Errorf("round %d: %v", round, err)
			}
			done <- l
		}()
		waitUntil(t, 5*time.Second, "a's waiter queued", fairQueued(rdb, name, 1))
		released := time.Now()
		if err := lease.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		var l *dlock.Lease
		select {
		case l = <-done:
		case <-time.After(grantLiveness):
			t.Fatalf("round %d: a's waiter not granted within %v", round, grantLiveness)
		}
		if l == nil {
			return
		}
		slowest = max(slowest, time.Since(released))
		t.Logf("cut %v: granted %v after the release", cut, time.Since(released).Round(time.Millisecond))
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if lease, err = holder.FairMutex(name).Lock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	_ = lease.Unlock(ctx)
	t.Logf("slowest grant after a reconnect: %v", slowest.Round(time.Millisecond))
}

// TestFairLateFirstAttemptOfGivenUpWaiter: a waiter of an owned Client (its grant channel
// lingering from an earlier wait, so it registers before its first attempt) gives up
// while its first attempt is held back; the next Lock of the same Client queues, then the
// held attempt lands, once or twice. The late copy takes nothing and queues no one ahead
// of the new waiter, which the holder's release grants at once, alone.
func TestFairLateFirstAttemptOfGivenUpWaiter(t *testing.T) {
	t.Parallel()
	deliveredOnceOrTwice(t, "grant-channel-late-first-", lateFirstAttempt)
}

// deliveredOnceOrTwice runs late in parallel subtests, with the held request delivered
// once and twice, each on a lock of its own named after prefix.
func deliveredOnceOrTwice(t *testing.T, prefix string, late func(t *testing.T, name string, duplicate bool)) {
	for _, tc := range []struct {
		name      string
		duplicate bool
	}{
		{"delivered", false},
		{"duplicated", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			late(t, prefix+tc.name, tc.duplicate)
		})
	}
}

func lateFirstAttempt(t *testing.T, name string, duplicate bool) {
	srv, rdb := standalone(t)
	holder, other := newClient(t, rdb), newClient(t, rdb)
	a := newLateProcessRT(t, srv, 300*time.Millisecond, dlock.WithOwner("late-a"))
	ctx := ctxTimeout(t, 30*time.Second)
	first, err := holder.FairMutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	_, err = a.FairMutex(name).Lock(short) // subscribes a's grant channel, which lingers
	cancel()
	if err == nil {
		t.Fatal("a took a held lock")
	}
	ctx1, giveUp := context.WithCancel(ctx)
	defer giveUp()
	h, done := a.hold(t, func() error {
		_, err := a.FairMutex(name).Lock(ctx1)
		return err
	})
	time.Sleep(50 * time.Millisecond) // the first attempt is out, held
	giveUp()
	if err := <-done; err == nil {
		t.Fatal("w1 took the lock through a held connection")
	}
	w2 := queueThenLand(t, ctx, rdb, a, name, h, duplicate, "the held attempt's landing")
	queue := rdb.LRange(ctx, keysOf(name).Queue(), 0, -1).Val()
	released := time.Now()
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	var l *dlock.Lease
	select {
	case l = <-w2:
	case <-time.After(grantLiveness):
		t.Fatalf("w2 not granted within %v of the release (queue after the landing: %v)", grantLiveness, queue)
	}
	if l == nil {
		return
	}
	t.Logf("queue after the landing %v; w2 granted %v after the release", queue, time.Since(released).Round(time.Millisecond))
	if o, err := other.FairMutex(name).TryLock(ctx); err == nil {
		_ = o.Unlock(ctx)
		t.Fatal("another Client took the lock w2 holds")
	}
	if l.Token() != first.Token()+1 {
		t.Errorf("w2's fencing token %d, want %d: someone held the lock between", l.Token(), first.Token()+1)
	}
	_ = l.Unlock(ctx)
}

// TestFairLateReleaseOfSameClientGrantsNothing: an owned Client's Unlock of a FairMutex is
// held back, and sent again on a fresh connection; another Client takes the lock, and the
// first Client's next Lock waits behind it, registered on the Client's grant channel.
// Then the held release lands, once or twice: it finds the lock not its token and
// changes nothing, so the waiter is not granted while the other Client holds, and is
// granted at once when it unlocks, with the next fencing token.
func TestFairLateReleaseOfSameClientGrantsNothing(t *testing.T) {
	t.Parallel()
	deliveredOnceOrTwice(t, "grant-channel-late-release-", lateRelease)
}

// queueThenLand starts w2, a Lock of name by a that queues, then lets the call h holds
// land (twice when duplicate), past the read timeout of the round trips it held, and
// waits for what the landing is (what). It returns where w2's lease arrives (nil on an
// error, which fails t).
func queueThenLand(t *testing.T, ctx context.Context, rdb *redis.Client, a *lateProcess, name string, h *lateproxy.Held, duplicate bool, what string) <-chan *dlock.Lease {
	t.Helper()
	w2 := make(chan *dlock.Lease, 1)
	go func() {
		l, err := a.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Errorf("w2: %v", err)
		}
		w2 <- l
	}()
	waitUntil(t, 5*time.Second, "w2 queued", fairQueued(rdb, name, 1))
	time.Sleep(400 * time.Millisecond) // past the held round trips' read timeout
	if duplicate {
		h.Duplicate()
	} else {
		h.Deliver()
	}
	waitClosed(t, h.Landed(), 10*time.Second, what)
	return w2
}

// lateRelease has a hold an owned late process's lock, its Unlock held back.
func lateRelease(t *testing.T, name string, duplicate bool) {
	srv, rdb := standalone(t)
	holder := newClient(t, rdb)
	a := newLateProcessRT(t, srv, 300*time.Millisecond, dlock.WithOwner("late-a"))
	ctx := ctxTimeout(t, 30*time.Second)
	l1 := fairWaitedFor(t, ctx, rdb, holder, a, name)
	h, done := a.hold(t, func() error { return l1.Unlock(ctx) })
	if err := <-done; err != nil {
		t.Fatalf("the Unlock, sent again: %v", err)
	}
	second, err := holder.FairMutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	w2 := queueThenLand(t, ctx, rdb, a, name, h, duplicate, "the held release's landing")
	select {
	case l := <-w2:
		t.Fatalf("w2 granted (%v) by a late release while another Client holds the lock", l != nil)
	case <-time.After(300 * time.Millisecond):
	}
	released := time.Now()
	if err := second.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case l := <-w2:
		if l == nil {
			return
		}
		t.Logf("w2 granted %v after the release", time.Since(released).Round(time.Millisecond))
		if l.Token() != second.Token()+1 {
			t.Errorf("w2's fencing token %d, want %d", l.Token(), second.Token()+1)
		}
		_ = l.Unlock(ctx)
	case <-time.After(grantLiveness):
		t.Fatalf("w2 not granted within %v of the release", grantLiveness)
	}
}

// fairWaitedFor returns a lease of a on the FairMutex name, granted by holder's release
// after a waited: a's grant channel is then subscribed, and lingers.
func fairWaitedFor(t *testing.T, ctx context.Context, rdb *redis.Client, holder *dlock.Client, a *lateProcess, name string) *dlock.Lease {
	t.Helper()
	first, err := holder.FairMutex(name).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	mine := make(chan *dlock.Lease, 1)
	go func() {
		l, err := a.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Errorf("a's first Lock: %v", err)
		}
		mine <- l
	}()
	waitUntil(t, 5*time.Second, "a queued", fairQueued(rdb, name, 1))
	if err := first.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := <-mine
	if l == nil {
		t.FailNow()
	}
	return l
}

// TestFairGrantHeardAfterClusterFailback: on a Cluster, a Client's grant channel of a lock
// stays subscribed (lingering) on the master of its slot. That master fails over to its
// replica, which Redis tells its shard-channel subscribers with an sunsubscribe, and the
// slot comes back to it. A grant to a waiter of the Client must still be heard when it is
// published, not found by the waiter's next refresh (up to a second later, each time).
func TestFairGrantHeardAfterClusterFailback(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, redistest.WithReplica())
	rdb := cl.Client(t)
	holder, a := newClient(t, rdb), newClient(t, rdb)
	ctx := ctxTimeout(t, 120*time.Second)
	const name = "grant-channel-failback"
	master, err := rdb.MasterForKey(ctx, keysOf(name).Lock)
	if err != nil {
		t.Fatal(err)
	}
	i := slices.Index(cl.Addrs, master.Options().Addr)
	grants := func(phase string) {
		for range 3 {
			fairGrantHeard(t, ctx, rdb, holder, a, name, phase)
		}
	}
	// The Client's slot map follows each change before the grants: a wait routed by a
	// stale map to a replica misses its grant, the same before 27cfadb as after.
	follows := func() bool {
		rdb.ReloadState(ctx)
		m, err := rdb.MasterForKey(ctx, keysOf(name).Lock)
		return err == nil && m.Options().Addr == cl.Addrs[i]
	}
	grants("before a failover")
	cl.Failover(t, i)
	waitUntil(t, 10*time.Second, "the slot map follows the failover", follows)
	grants("failed over")
	back := redis.NewClient(cl.Replicas[i].Options())
	defer back.Close()
	waitUntil(t, 30*time.Second, "the old master replicating", func() bool {
		return strings.Contains(back.Info(ctx, "replication").Val(), "master_link_status:up")
	})
	cl.TakeOver(t, i)
	waitUntil(t, 10*time.Second, "the slot map follows the failback", follows)
	grants("failed back")
}

// fairGrantHeard has holder release the FairMutex name to a waiter of a, and fails the
// test unless the waiter holds it within what a message takes (not a refresh).
func fairGrantHeard(t *testing.T, ctx context.Context, rdb redis.UniversalClient, holder, a *dlock.Client, name, phase string) {
	t.Helper()
	const heard = 500 * time.Millisecond // a refresh comes a second after the last attempt
	l, err := holder.FairMutex(name).Lock(ctx)
	if err != nil {
		t.Fatalf("%s: %v", phase, err)
	}
	done := make(chan *dlock.Lease, 1)
	go func() {
		w, err := a.FairMutex(name).Lock(ctx)
		if err != nil {
			t.Errorf("%s: %v", phase, err)
		}
		done <- w
	}()
	waitUntil(t, 10*time.Second, phase+": a's waiter queued", fairQueued(rdb, name, 1))
	time.Sleep(50 * time.Millisecond) // its attempt's reply read: it waits
	released := time.Now()
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("%s: %v", phase, err)
	}
	w := <-done
	if w == nil {
		t.FailNow()
	}
	took := time.Since(released)
	_ = w.Unlock(ctx)
	if took > heard {
		t.Errorf("%s: the waiter held the lock %v after its grant, want under %v: it did not hear it",
			phase, took.Round(time.Millisecond), heard)
	}
}
