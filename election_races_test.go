package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
)

// TestRunNeverOverlapsFn: a Run whose fn ignores its ctx after the term was lost (the lock
// removed by ForceUnlock) does not campaign again, and so never starts fn again, before fn
// returned, even while a candidate of another process could lead.
func TestRunNeverOverlapsFn(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 30*time.Second)
	c := newClient(t, rdb)
	e := c.Election("overlap", dlock.TTL(time.Second))
	var running, most, calls atomic.Int32
	errDone := errors.New("done")
	err := e.Run(ctx, "r", func(fnCtx context.Context) error {
		n := running.Add(1)
		defer running.Add(-1)
		if n > most.Load() {
			most.Store(n)
		}
		if calls.Add(1) > 1 {
			return errDone
		}
		if _, err := c.ForceUnlock(ctx, "overlap"); err != nil {
			t.Error(err)
		}
		<-fnCtx.Done()
		time.Sleep(1500 * time.Millisecond) // ignores its ctx for longer than a TTL
		return nil
	})
	if !errors.Is(err, errDone) || calls.Load() != 2 {
		t.Fatalf("Run = %v after %d calls, want errDone after 2", err, calls.Load())
	}
	if m := most.Load(); m != 1 {
		t.Fatalf("fn ran %d times at once", m)
	}
}

// TestElectionFlushAll: a FLUSHALL under a leader (every key gone, no message published)
// makes Leader report no leader at once and Observe within the term's time left plus a
// round trip; the term learns of it at its next renewal, its Proclaim then writes nothing,
// and the next term is observed.
func TestElectionFlushAll(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 30*time.Second)
	const ttl = time.Second
	e := newClient(t, rdb).Election("flush", dlock.TTL(ttl))
	obs := newClient(t, rdb).Election("flush").Observe(ctx)
	term, err := e.Campaign(ctx, "before")
	if err != nil {
		t.Fatal(err)
	}
	until(t, obs, 5*time.Second, "the leader", valued("before"))
	flushed := time.Now()
	if err := rdb.FlushAll(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	if _, err := e.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Fatalf("Leader after FLUSHALL = %v, want ErrNoLeader", err)
	}
	until(t, obs, ttl+time.Second, "no leader after FLUSHALL", noLeader)
	t.Logf("Observe reported no leader %v after FLUSHALL", time.Since(flushed))
	nextAfterDataLost(t, ctx, obs, term, newClient(t, rdb).Election("flush", dlock.TTL(ttl)), "FLUSHALL", 2*ttl)
}

// nextAfterDataLost: once its server lost the election's keys (what), term ends within
// d, a Proclaim of it is refused, and next's campaign leads, which obs reports.
func nextAfterDataLost(t *testing.T, ctx context.Context, obs <-chan dlock.Leader, term *dlock.Term, next *dlock.Election, what string, d time.Duration) {
	t.Helper()
	waitClosed(t, term.Done(), d, "the term's end after "+what)
	if err := term.Proclaim(ctx, "stale"); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Proclaim of the term after %s = %v, want ErrNotHeld", what, err)
	}
	after, err := next.Campaign(ctx, "after")
	if err != nil {
		t.Fatal(err)
	}
	until(t, obs, 5*time.Second, "the next leader", valued("after"))
	t.Logf("tokens: %d before %s, %d after (the counter was lost too: guarantees.md)", term.Token(), what, after.Token())
	_ = after.Unlock(ctx)
}

// TestElectionQuorumPausedNode: on a quorum of 3 with one node paused (SIGSTOP), a term
// leads, proclaims and hands over, and Observe and Leader follow it without waiting for
// the paused node; once it resumes, with the old term's stale writes landing on it,
// Leader still reports the latest term.
func TestElectionQuorumPausedNode(t *testing.T) {
	t.Parallel()
	servers, nodes, _ := quorumOf(t, 3)
	ctx := ctxTimeout(t, 60*time.Second)
	const ttl = time.Second
	client := func() *dlock.Client {
		c := newQuorumClient(t, nodes)
		return c
	}
	ea, eb := client().Election("qp", dlock.TTL(ttl)), client().Election("qp", dlock.TTL(ttl))
	obs := client().Election("qp").Observe(ctx)
	until(t, obs, 5*time.Second, "no leader", noLeader)
	servers[2].Pause(t)
	resumed := false
	defer func() {
		if !resumed {
			servers[2].Resume(t)
		}
	}()
	ta, err := ea.Campaign(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	until(t, obs, 5*time.Second, "a1", valued("a1"))
	if err := ta.Proclaim(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	until(t, obs, 5*time.Second, "a2", valued("a2"))
	got := make(chan *dlock.Term, 1)
	go func() {
		tb, err := eb.Campaign(ctx, "b1")
		if err != nil {
			t.Error(err)
		}
		got <- tb
	}()
	time.Sleep(20 * time.Millisecond)
	resigned := time.Now()
	_ = ta.Unlock(ctx)
	l := until(t, obs, 5*time.Second, "b1", valued("b1"))
	// A reading settled by two nodes does not wait for the paused one (its timeout is
	// at least 500ms).
	if d := time.Since(resigned); d > 400*time.Millisecond {
		t.Errorf("the handover was observed %v after the resignation began", d)
	}
	start := time.Now()
	if _, err := eb.Leader(ctx); err != nil || time.Since(start) > 400*time.Millisecond {
		t.Errorf("Leader = %v after %v, with one node paused", err, time.Since(start))
	}
	tb := <-got
	if tb == nil || l.Token != tb.Token() || tb.Token() <= ta.Token() {
		t.Fatalf("observed %+v; want b1 with the term's token, above %d", l, ta.Token())
	}
	servers[2].Resume(t)
	resumed = true
	time.Sleep(100 * time.Millisecond) // what was sent to the paused node lands
	if l, err := eb.Leader(ctx); err != nil || l.Value != "b1" || l.Token != tb.Token() {
		t.Fatalf("Leader after the node resumed = %+v, %v; want b1 with token %d", l, err, tb.Token())
	}
	_ = tb.Unlock(ctx)
	until(t, obs, 5*time.Second, "no leader after the resignation", noLeader)
}

// TestObserveSlowReaderGetsLatest: a reader that takes nothing while a term proclaims many
// values, then resigns and another term leads, first reads at most one stale value, then
// the latest leader.
func TestObserveSlowReaderGetsLatest(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 30*time.Second)
	e := newClient(t, rdb).Election("slow", dlock.TTL(2*time.Second))
	obs := newClient(t, rdb).Election("slow").Observe(ctx)
	until(t, obs, 5*time.Second, "no leader", noLeader)
	term, err := e.Campaign(ctx, "v0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 50 {
		wg.Go(func() { _ = term.Proclaim(ctx, fmt.Sprint("v", i+1)) })
	}
	wg.Wait()
	want := term.Value()
	time.Sleep(200 * time.Millisecond) // Observe reads the last write
	select {
	case l := <-obs:
		if l.Err != nil || l.Value != want {
			t.Fatalf("a slow reader got %+v, want the latest value %q", l, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("nothing observed")
	}
	_ = term.Unlock(ctx)
	until(t, obs, 5*time.Second, "no leader", noLeader)
}

// TestLateProclaimWithinTermNeverRevertsValue: a Proclaim's first copy, held back while
// go-redis resends it and a later Proclaim of the same term succeeds, then delivered
// twice, changes neither the record nor what Leader and Observe report
// (election_proclaim.lua's write numbers).
func TestLateProclaimWithinTermNeverRevertsValue(t *testing.T) {
	t.Parallel()
	srv, rdb := standalone(t)
	a := newLateProcessRT(t, srv, 200*time.Millisecond)
	ctx := ctxTimeout(t, 30*time.Second)
	obs := newClient(t, rdb).Election("late-p").Observe(ctx)
	ta, err := a.Election("late-p", dlock.TTL(2*time.Second)).Campaign(ctx, "a0")
	if err != nil {
		t.Fatal(err)
	}
	held, proclaimed := a.hold(t, func() error { return ta.Proclaim(ctx, "early") })
	if err := <-proclaimed; err != nil {
		t.Fatalf("the resent Proclaim: %v", err)
	}
	if err := ta.Proclaim(ctx, "later"); err != nil {
		t.Fatal(err)
	}
	until(t, obs, 5*time.Second, "later", valued("later"))
	waitUntil(t, 10*time.Second, "the held connections closed by the process", held.ClientsClosed)
	held.Duplicate()
	waitClosed(t, held.Landed(), 10*time.Second, "the held request's landing")
	if l, err := a.Election("late-p").Leader(ctx); err != nil || l.Value != "later" || l.Token != ta.Token() {
		t.Fatalf("after the late copies Leader = %+v, %v; want later, token %d", l, err, ta.Token())
	}
	if v := ta.Value(); v != "later" {
		t.Fatalf("Value = %q, want later", v)
	}
	select {
	case l := <-obs:
		t.Fatalf("Observe sent %+v after the late copies, which changed nothing", l)
	case <-time.After(300 * time.Millisecond):
	}
	_ = ta.Unlock(ctx)
}

// TestProclaimRacingUnlockAndRenewal: Proclaims sent while the term renews (a short TTL)
// all succeed, and one racing its term's Unlock either succeeds or fails with ErrNotHeld,
// never ErrLost (the release may land first: the term was resigned, not lost); either way
// the term ends released and no leader remains.
func TestProclaimRacingUnlockAndRenewal(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 60*time.Second)
	// A TTL short enough that most terms renew while they proclaim, long enough that a
	// loaded machine's renewals land in time.
	e := newClient(t, rdb).Election("race", dlock.TTL(600*time.Millisecond))
	for i := range 20 {
		term, err := e.Campaign(ctx, "v")
		if err != nil {
			t.Fatal(err)
		}
		for j := range 5 { // across renewals
			if err := term.Proclaim(ctx, fmt.Sprint(i, j)); err != nil {
				t.Fatalf("Proclaim while leading: %v", err)
			}
			time.Sleep(time.Duration(i%4) * 40 * time.Millisecond)
		}
		errs := make(chan error, 1)
		go func() { errs <- term.Proclaim(ctx, "racing") }()
		if err := term.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if err := <-errs; err != nil && (!errors.Is(err, dlock.ErrNotHeld) || errors.Is(err, dlock.ErrLost)) {
			t.Fatalf("Proclaim racing Unlock = %v, want nil or ErrNotHeld, not ErrLost", err)
		}
		if err := term.Err(); !errors.Is(err, dlock.ErrReleased) {
			t.Fatalf("after Unlock the term's Err = %v, want ErrReleased", err)
		}
		if _, err := e.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
			t.Fatalf("Leader after the resignation = %v, want ErrNoLeader", err)
		}
	}
}

// TestObserveForceUnlock: ForceUnlock of an election's name (it publishes as a release
// does) makes Observe report no leader within about a round trip, and the term ends at
// its next renewal, after which its Proclaim writes nothing.
func TestObserveForceUnlock(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 30*time.Second)
	c := newClient(t, rdb)
	obs := c.Election("forced").Observe(ctx)
	term, err := newClient(t, rdb).Election("forced", dlock.TTL(2*time.Second)).Campaign(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	until(t, obs, 5*time.Second, "the leader", valued("v"))
	forced := time.Now()
	if _, err := c.ForceUnlock(ctx, "forced"); err != nil {
		t.Fatal(err)
	}
	until(t, obs, 5*time.Second, "no leader", noLeader)
	if d := time.Since(forced); d > 500*time.Millisecond {
		t.Errorf("Observe reported no leader %v after ForceUnlock", d)
	}
	waitClosed(t, term.Done(), 3*time.Second, "the forced term's end")
	if err := term.Proclaim(ctx, "stale"); !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Proclaim after ForceUnlock = %v, want ErrLost", err)
	}
	// The Proclaim was refused before it was sent (the term had ended here): this checks
	// that the ForceUnlock left no leader, not Redis's refusal.
	if _, err := c.Election("forced").Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Fatalf("Leader after the stale Proclaim = %v, want ErrNoLeader", err)
	}
}

// TestElectionServerRestart: a server restarted empty under a leader ends its term (at
// its next renewal) and Observe reports no leader, then the next term; a Proclaim of the
// ended term is refused (by the client, which saw the term end: what Redis does with a
// late one is internal/scripts' TestElectionProclaim and election_late_test.go).
func TestElectionServerRestart(t *testing.T) {
	t.Parallel()
	srv, rdb := standalone(t)
	ctx := ctxTimeout(t, 60*time.Second)
	const ttl = time.Second
	obs := newClient(t, rdb).Election("restart").Observe(ctx)
	e := newClient(t, rdb).Election("restart", dlock.TTL(ttl))
	term, err := e.Campaign(ctx, "before")
	if err != nil {
		t.Fatal(err)
	}
	until(t, obs, 5*time.Second, "the leader", valued("before"))
	srv.Kill(t)
	srv.Restart(t)
	until(t, obs, 10*time.Second, "no leader after the restart", noLeader)
	nextAfterDataLost(t, ctx, obs, term, e, "an empty restart", 5*time.Second)
}

// TestElectionReadsTellOfSilence: on a quorum, an election's reading that a node lets time
// out tells the Client's observers (NodeSilent), as a lock's poll does.
func TestElectionReadsTellOfSilence(t *testing.T) {
	t.Parallel()
	servers, nodes, _ := quorumOf(t, 3)
	ctx := ctxTimeout(t, 30*time.Second)
	silent := make(chan string, 8)
	c := newQuorumClient(t, nodes, dlock.WithObserver(dlock.Observer{
		NodeSilent: func(s dlock.NodeSilence) {
			select {
			case silent <- s.Addr:
			default:
			}
		},
	}))
	obs := c.Election("quiet", dlock.TTL(time.Second)).Observe(ctx)
	until(t, obs, 5*time.Second, "no leader", noLeader)
	servers[1].Pause(t)
	defer servers[1].Resume(t)
	select {
	case addr := <-silent:
		if addr != servers[1].Addr {
			t.Fatalf("NodeSilent for %s, want the paused %s", addr, servers[1].Addr)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no NodeSilent within 10s of a node's pause, while Observe read the election")
	}
}
