package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// deployment is one kind of deployment an election test runs on: a new Client on it, and
// every node's Redis client (to delete a key behind dlock's back).
type deployment struct {
	client func(opts ...dlock.Option) *dlock.Client
	nodes  []redis.UniversalClient
	addrs  []string
	kind   string // "standalone", "cluster" or "quorum"
}

// onDeployments runs f on a standalone server, a three-master Cluster and a quorum of 3.
func onDeployments(t *testing.T, f func(t *testing.T, d deployment)) {
	t.Run("standalone", func(t *testing.T) { f(t, standaloneDeployment(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, clusterDeployment(t)) })
	t.Run("quorum", func(t *testing.T) { f(t, quorumDeployment(t)) })
}

// onGuardDeployments runs f on a standalone server and a three-master Cluster: the
// deployments where Lease.Guard sends its writes (a quorum's Guard refuses before it
// sends, TestGuardQuorum).
func onGuardDeployments(t *testing.T, f func(t *testing.T, d deployment)) {
	t.Run("standalone", func(t *testing.T) { f(t, standaloneDeployment(t)) })
	t.Run("cluster", func(t *testing.T) { f(t, clusterDeployment(t)) })
}

func standaloneDeployment(t *testing.T) deployment {
	t.Helper()
	srv, rdb := standalone(t)
	return deployment{kind: "standalone", nodes: []redis.UniversalClient{rdb}, addrs: []string{srv.Addr},
		client: func(opts ...dlock.Option) *dlock.Client { return newClient(t, rdb, opts...) }}
}

func clusterDeployment(t *testing.T) deployment {
	t.Helper()
	cl := redistest.StartCluster(t, 3)
	rdb := cl.Client(t)
	return deployment{kind: "cluster", nodes: []redis.UniversalClient{rdb}, addrs: cl.Addrs,
		client: func(opts ...dlock.Option) *dlock.Client { return newClient(t, rdb, opts...) }}
}

func quorumDeployment(t *testing.T) deployment {
	t.Helper()
	servers, nodes, _ := quorumOf(t, 3)
	return deployment{kind: "quorum", nodes: nodes, addrs: addrs(servers),
		client: func(opts ...dlock.Option) *dlock.Client {
			c := newQuorumClient(t, nodes, opts...)
			return c
		}}
}

// dial returns a new Redis client of a standalone or Cluster deployment, which the test's
// cleanup closes: one a test can add its own hooks to.
func (d deployment) dial(t *testing.T) redis.UniversalClient {
	t.Helper()
	var rdb redis.UniversalClient
	switch d.kind {
	case "standalone":
		rdb = redis.NewClient(&redis.Options{Addr: d.addrs[0]})
	case "cluster":
		rdb = redis.NewClusterClient(&redis.ClusterOptions{Addrs: d.addrs})
	default:
		t.Fatalf("dial: a %s has no one Redis client", d.kind)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// del deletes key on every node, as another program (or an operator) would.
func (d deployment) del(t *testing.T, key string) {
	t.Helper()
	for _, n := range d.nodes {
		if err := n.Del(context.Background(), key).Err(); err != nil {
			t.Fatal(err)
		}
	}
}

// next takes the next Leader from ch within d.
func next(t *testing.T, ch <-chan dlock.Leader, d time.Duration) dlock.Leader {
	t.Helper()
	select {
	case l, ok := <-ch:
		if !ok {
			t.Fatal("Observe's channel closed")
		}
		return l
	case <-time.After(d):
		t.Fatalf("Observe sent nothing within %v", d)
	}
	return dlock.Leader{}
}

// until takes Leaders from ch until one satisfies ok, within d.
func until(t *testing.T, ch <-chan dlock.Leader, d time.Duration, what string, ok func(dlock.Leader) bool) dlock.Leader {
	t.Helper()
	deadline := time.After(d)
	for {
		select {
		case l, open := <-ch:
			if !open {
				t.Fatalf("Observe's channel closed before %s", what)
			}
			if ok(l) {
				return l
			}
		case <-deadline:
			t.Fatalf("Observe did not report %s within %v", what, d)
		}
	}
}

func noLeader(l dlock.Leader) bool { return errors.Is(l.Err, dlock.ErrNoLeader) }

func valued(v string) func(dlock.Leader) bool {
	return func(l dlock.Leader) bool { return l.Err == nil && l.Value == v }
}

// TestElection: a term leads alone, its value and owner are read and observed, Proclaim
// changes it, a resignation passes the lead to a waiting candidate with a greater token,
// and the writes of a term that ended fail with their errors; on every deployment a Mutex
// works on.
func TestElection(t *testing.T) {
	t.Parallel()
	onDeployments(t, electionBasics)
	t.Run("sentinel", func(t *testing.T) {
		rdb := redistest.StartSentinel(t).Client(t)
		electionBasics(t, deployment{kind: "sentinel", nodes: []redis.UniversalClient{rdb},
			client: func(opts ...dlock.Option) *dlock.Client { return newClient(t, rdb, opts...) }})
	})
}

func electionBasics(t *testing.T, d deployment) {
	ctx := ctxTimeout(t, 60*time.Second)
	ea := d.client(dlock.WithOwner("a")).Election("e", dlock.TTL(2*time.Second))
	eb := d.client(dlock.WithOwner("b")).Election("e", dlock.TTL(2*time.Second))
	if _, err := eb.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Fatalf("Leader before any campaign = %v, want ErrNoLeader", err)
	}
	obs := eb.Observe(ctx)
	if l := next(t, obs, 5*time.Second); !noLeader(l) {
		t.Fatalf("first observation %+v, want no leader", l)
	}
	before := time.Now()
	ta, err := ea.Campaign(ctx, "a1")
	if err != nil {
		t.Fatal(err)
	}
	l, err := eb.Leader(ctx)
	if err != nil || l.Value != "a1" || l.Owner != "a" || l.Token != ta.Token() || ta.Value() != "a1" {
		t.Fatalf("Leader = %+v, %v; want a1 by a with token %d", l, err, ta.Token())
	}
	if l.Since.Before(before.Add(-time.Second)) || l.Since.After(time.Now().Add(time.Second)) {
		t.Errorf("Since %v, want about %v", l.Since, before)
	}
	until(t, obs, 5*time.Second, "a1", valued("a1"))
	if _, err := eb.TryCampaign(ctx, "b1"); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryCampaign while led = %v, want ErrNotAcquired", err)
	}
	if err := ta.Proclaim(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
	until(t, obs, 5*time.Second, "a2", valued("a2"))
	checkBadValues(t, ctx, ea, ta)
	checkHandover(t, ctx, d, ea, eb, ta, obs)
}

// checkBadValues: a value above MaxValueLen is refused, and changes nothing.
func checkBadValues(t *testing.T, ctx context.Context, e *dlock.Election, term *dlock.Term) {
	t.Helper()
	big := strings.Repeat("x", dlock.MaxValueLen+1)
	if err := term.Proclaim(ctx, big); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("Proclaim of %d bytes = %v, want an error about the limit", len(big), err)
	}
	if _, err := e.TryCampaign(ctx, big); err == nil || !strings.Contains(err.Error(), "limit") {
		t.Fatalf("TryCampaign of %d bytes = %v, want an error about the limit", len(big), err)
	}
	if err := term.Proclaim(ctx, strings.Repeat("y", dlock.MaxValueLen)); err != nil {
		t.Fatalf("Proclaim of MaxValueLen bytes: %v", err)
	}
	if err := term.Proclaim(ctx, "a2"); err != nil {
		t.Fatal(err)
	}
}

// checkHandover: ta resigns, eb's waiting Campaign leads with a greater token; ta's
// Proclaim then fails; a term whose lock is deleted is lost, and its Proclaim says so.
func checkHandover(t *testing.T, ctx context.Context, d deployment, ea, eb *dlock.Election, ta *dlock.Term, obs <-chan dlock.Leader) {
	t.Helper()
	got := make(chan *dlock.Term, 1)
	go func() {
		tb, err := eb.Campaign(ctx, "b1")
		if err != nil {
			t.Error(err)
		}
		got <- tb
	}()
	time.Sleep(50 * time.Millisecond)
	if err := ta.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	tb := <-got
	if tb == nil {
		t.FailNow()
	}
	if tb.Token() <= ta.Token() {
		t.Fatalf("the next term's token %d is not above %d", tb.Token(), ta.Token())
	}
	until(t, obs, 5*time.Second, "b1", valued("b1"))
	if err := ta.Proclaim(ctx, "late"); !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrReleased) {
		t.Fatalf("Proclaim after resigning = %v, want ErrNotHeld and ErrReleased", err)
	}
	d.del(t, "dlock:e")
	if err := tb.Proclaim(ctx, "b2"); !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("Proclaim after a loss = %v, want ErrNotHeld and ErrLost", err)
	}
	waitClosed(t, tb.Done(), time.Second, "the lost term's Done")
	if l, err := ea.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
		t.Fatalf("Leader after the loss = %+v, %v; want ErrNoLeader", l, err)
	}
	until(t, obs, 5*time.Second, "no leader", noLeader)
}

// TestElectionObserve: Observe sees every leader of a series of handovers, each to a
// candidate that waited; the delay from the resignation to the new leader observed is
// logged (median). Its report of an expiry is tested with a killed leader
// (TestElectionKilledLeader).
func TestElectionObserve(t *testing.T) {
	t.Parallel()
	onDeployments(t, func(t *testing.T, d deployment) {
		ctx := ctxTimeout(t, 60*time.Second)
		const ttl = time.Second
		cands := []*dlock.Election{d.client().Election("o", dlock.TTL(ttl)), d.client().Election("o", dlock.TTL(ttl))}
		obs := d.client().Election("o").Observe(ctx)
		next(t, obs, 5*time.Second)
		var handover []time.Duration
		term, err := cands[0].Campaign(ctx, "v0")
		if err != nil {
			t.Fatal(err)
		}
		until(t, obs, 5*time.Second, "v0", valued("v0"))
		for i := 1; i <= 6; i++ {
			value := fmt.Sprintf("v%d", i)
			got := make(chan *dlock.Term, 1)
			go func() {
				nt, err := cands[i%2].Campaign(ctx, value)
				if err != nil {
					t.Error(err)
				}
				got <- nt
			}()
			time.Sleep(20 * time.Millisecond) // the candidate waits
			resigned := time.Now()
			_ = term.Unlock(ctx)
			l := until(t, obs, 5*time.Second, value, valued(value))
			handover = append(handover, time.Since(resigned))
			prev := term.Token()
			if term = <-got; term == nil {
				t.FailNow()
			}
			if l.Token <= prev || l.Token != term.Token() {
				t.Fatalf("observed token %d, want the term's %d above %d", l.Token, term.Token(), prev)
			}
		}
		_ = term.Unlock(ctx)
		t.Logf("%s: Observe's delay after a handover: median %v of %v", d.kind, median(handover), handover)
	})
}

// TestElectionRun: Run leads again after a loss, with a greater token, and returns fn's
// error without campaigning again when fn returns while leading; it resigns then.
func TestElectionRun(t *testing.T) {
	t.Parallel()
	onDeployments(t, func(t *testing.T, d deployment) {
		ctx := ctxTimeout(t, 30*time.Second)
		e := d.client().Election("run", dlock.TTL(time.Second))
		tokens := make(chan uint64, 4)
		errDone := errors.New("done")
		calls := 0
		err := e.Run(ctx, "runner", func(ctx context.Context) error {
			calls++
			lease, _ := dlock.LeaseFrom(ctx)
			tokens <- lease.Token()
			if calls == 1 {
				d.del(t, "dlock:run") // the term is lost at its next renewal
				<-ctx.Done()
				return ctx.Err()
			}
			return errDone
		})
		if !errors.Is(err, errDone) || calls != 2 {
			t.Fatalf("Run = %v after %d calls of fn, want errDone after 2", err, calls)
		}
		if first, second := <-tokens, <-tokens; second <= first {
			t.Fatalf("the second term's token %d is not above the first's %d", second, first)
		}
		if _, err := e.Leader(ctx); !errors.Is(err, dlock.ErrNoLeader) {
			t.Fatalf("Leader after Run returned = %v, want ErrNoLeader: Run resigns", err)
		}
		held, err := e.Campaign(ctx, "holder")
		if err != nil {
			t.Fatal(err)
		}
		short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
		defer cancel()
		if err := e.Run(short, "runner", func(context.Context) error { return nil }); !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Run while another leads until ctx ends = %v, want DeadlineExceeded", err)
		}
		_ = held.Unlock(ctx)
	})
}

// TestElectionObserveFailures: while the server is down Observe sends a Leader whose Err
// says why and logs it, then follows the election again once the server is back (listening
// again too); an invalid election gets one error and a closed channel; Close closes the
// channel.
func TestElectionObserveFailures(t *testing.T) {
	t.Parallel()
	srv, rdb := standalone(t)
	ctx := ctxTimeout(t, 60*time.Second)
	var log syncBuffer
	c := newClient(t, rdb, dlock.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	other := newClient(t, rdb)
	obs := c.Election("f", dlock.TTL(time.Second)).Observe(ctx)
	until(t, obs, 5*time.Second, "no leader", noLeader)

	srv.Kill(t)
	l := until(t, obs, 10*time.Second, "an error", func(l dlock.Leader) bool { return l.Err != nil && !noLeader(l) })
	t.Logf("observed while the server is down: %v", l.Err)
	srv.Restart(t)
	until(t, obs, 10*time.Second, "no leader after the restart", noLeader)
	term, err := other.Election("f").Campaign(ctx, "back")
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	until(t, obs, 5*time.Second, "the leader after the restart", valued("back"))
	t.Logf("after the restart, a new leader was observed %v after its campaign returned", time.Since(start))
	_ = term.Unlock(ctx)
	if !strings.Contains(log.String(), "cannot read the election") {
		t.Errorf("nothing logged while the server was down; the log:\n%s", log.String())
	}

	bad := c.Election("").Observe(ctx)
	if l := next(t, bad, 5*time.Second); l.Err == nil || noLeader(l) {
		t.Fatalf("an invalid election observed %+v, want its error", l)
	}
	if _, open := <-bad; open {
		t.Fatal("an invalid election's channel stays open")
	}
	_ = c.Close()
	for range obs { // drained, then closed
	}
}

// TestElectionGuard: a term's Guard writes while it leads, and nothing once it resigned.
func TestElectionGuard(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 10*time.Second)
	term, err := newClient(t, rdb).Election("guarded").Campaign(ctx, "v")
	if err != nil {
		t.Fatal(err)
	}
	key := term.Key("state")
	write := func(pipe redis.Pipeliner) error { pipe.Set(ctx, key, term.Token(), 0); return nil }
	if _, err := term.Guard(ctx, write); err != nil {
		t.Fatalf("Guard while leading: %v", err)
	}
	_ = term.Unlock(ctx)
	rdb.Del(ctx, key)
	if _, err := term.Guard(ctx, write); !errors.Is(err, dlock.ErrNotHeld) {
		t.Fatalf("Guard after resigning = %v, want ErrNotHeld", err)
	}
	// Refused before sending (the term ended here); Redis's own refusal of a stale Guard
	// is TestGuardEveryKind's, for the Mutex whose key a term holds.
	if n := rdb.Exists(ctx, key).Val(); n != 0 {
		t.Fatal("Guard after resigning wrote")
	}
}
