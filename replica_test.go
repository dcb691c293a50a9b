package dlock_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/faultproxy"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// replicated is a master with one replica that replicates through a proxy, so that a test
// can cut the replication link alone; clients reach the master directly.
type replicated struct {
	master, replica *redistest.Server
	link            *faultproxy.Proxy
	rdb             *redis.Client // on the master
}

func startReplicated(t *testing.T) *replicated {
	t.Helper()
	d := &replicated{master: redistest.Start(t, redistest.WithArgs("--repl-diskless-sync-delay", "0"))}
	d.link = faultproxy.New(t, d.master.Addr)
	d.replica = redistest.StartReplica(t, d.link.Addr)
	d.rdb = d.master.Client(t)
	return d
}

// cut cuts the replication link and returns once the master sees no replica: from then
// on, no write reaches the replica.
func (d *replicated) cut(t *testing.T) {
	t.Helper()
	d.link.Cut(t)
	deadline := time.Now().Add(10 * time.Second)
	for {
		info, err := d.rdb.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "connected_slaves:0") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("the master still sees its replica 10s after the link was cut: %v %s", err, info)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestReplicaAcksInvalid: WithReplicaAcks with a bad argument, or on a Redis client that
// cannot carry WAIT to the master, gives a Client whose every operation says what is
// wrong, and NewQuorum the same error.
func TestReplicaAcksInvalid(t *testing.T) {
	srv := redistest.Start(t)
	slowRead, defaultRead := srv.Options(), srv.Options()
	slowRead.ReadTimeout, defaultRead.ReadTimeout = 200*time.Millisecond, 0
	secondRead, shortRead := srv.Options(), srv.Options()
	secondRead.ReadTimeout, shortRead.ReadTimeout = time.Second, 300*time.Millisecond
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr}})
	t.Cleanup(func() { _ = ring.Close() })
	for _, tc := range []struct {
		name    string
		rdb     redis.UniversalClient
		opt     dlock.Option
		message string
	}{
		{"no replicas", srv.Client(t), dlock.WithReplicaAcks(0, time.Second), "replicas must be at least 1"},
		{"negative replicas", srv.Client(t), dlock.WithReplicaAcks(-1, time.Second), "replicas must be at least 1"},
		{"zero timeout", srv.Client(t), dlock.WithReplicaAcks(1, 0), "between 1ms and 10s"},
		{"negative timeout", srv.Client(t), dlock.WithReplicaAcks(1, -time.Second), "between 1ms and 10s"},
		{"timeout below a millisecond", srv.Client(t), dlock.WithReplicaAcks(1, 500*time.Microsecond), "between 1ms and 10s"},
		{"absurd timeout", srv.Client(t), dlock.WithReplicaAcks(1, time.Hour), "between 1ms and 10s"},
		{"timeout beyond the read timeout", closed(t, redis.NewClient(slowRead)), dlock.WithReplicaAcks(1, 200*time.Millisecond), "ReadTimeout 200ms"},
		{"timeout beyond the default read timeout", closed(t, redis.NewClient(defaultRead)), dlock.WithReplicaAcks(1, 9*time.Second), "the Redis client's ReadTimeout"},
		{"timeout without headroom in the read timeout", closed(t, redis.NewClient(secondRead)), dlock.WithReplicaAcks(1, 850*time.Millisecond), "use a timeout of at most 800ms"},
		{"timeout without headroom in the default read timeout", closed(t, redis.NewClient(defaultRead)), dlock.WithReplicaAcks(1, 4500*time.Millisecond), "use a timeout of at most 4s"},
		{"timeout without the minimum headroom", closed(t, redis.NewClient(shortRead)), dlock.WithReplicaAcks(1, 250*time.Millisecond), "use a timeout of at most 200ms"},
		{"a Ring", ring, dlock.WithReplicaAcks(1, time.Second), "not a *redis.Ring"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := newClient(t, tc.rdb, tc.opt)
			_, err := c.Mutex("m").TryLock(context.Background())
			if err == nil || !strings.Contains(err.Error(), tc.message) || !strings.HasPrefix(err.Error(), "dlock: WithReplicaAcks") {
				t.Fatalf("TryLock: %v; want an error about WithReplicaAcks that says %q", err, tc.message)
			}
			if _, qerr := dlock.NewQuorum([]redis.UniversalClient{tc.rdb}, tc.opt); qerr == nil || qerr.Error() != err.Error() {
				t.Fatalf("NewQuorum: %v; want %v", qerr, err)
			}
		})
	}
}

// TestReplicaAcksHeadroom: a timeout that leaves ReadTimeout its headroom (a fifth, at
// least 100ms) is accepted: the WAIT runs, and without a replica the acquisition fails
// with ErrNotReplicated, not a read timeout.
func TestReplicaAcksHeadroom(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	opt := srv.Options()
	opt.ReadTimeout = time.Second
	c := newClient(t, closed(t, redis.NewClient(opt)), dlock.WithReplicaAcks(1, 800*time.Millisecond))
	if _, err := c.Mutex("m").TryLock(ctxTimeout(t, 10*time.Second)); !errors.Is(err, dlock.ErrNotReplicated) {
		t.Fatalf("TryLock without a replica: %v; want ErrNotReplicated", err)
	}
}

func closed(t *testing.T, rdb *redis.Client) *redis.Client {
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// TestReplicaAcks: with WithReplicaAcks(1, ...) and the replica in step, every lease's
// key is on the replica when Lock or Extend returns and gone from it when Unlock returns;
// with the replication link cut, an acquisition fails with ErrNotReplicated and leaves no
// key, an Extend fails and leaves the lease as it was, renewals fail until the lease is
// lost at its deadline, and an Unlock says so (the lease ends all the same).
func TestReplicaAcks(t *testing.T) {
	t.Parallel()
	d := startReplicated(t)
	replica := d.replica.Client(t)
	// A generous timeout while the replica is in step (the link is a proxy in this
	// process, on a loaded machine), a short one once it is cut: every attempt waits it.
	inStep := newClient(t, d.rdb, dlock.WithReplicaAcks(1, 500*time.Millisecond))
	c := newClient(t, d.rdb, dlock.WithReplicaAcks(1, 100*time.Millisecond))
	ctx := ctxTimeout(t, 30*time.Second)
	onReplica := func(name string) bool {
		n, err := replica.Exists(ctx, keysOf(name).Lock).Result()
		if err != nil {
			t.Fatalf("EXISTS on the replica: %v", err)
		}
		return n == 1
	}

	l := mustLock(t, inStep.Mutex("in-step"), ctx)
	if !onReplica("in-step") {
		t.Fatal("Lock returned before the replica had the key")
	}
	if err := l.Extend(ctx, time.Minute); err != nil {
		t.Fatalf("Extend: %v", err)
	}
	if ttl, err := replica.PTTL(ctx, "dlock:in-step").Result(); err != nil || ttl < 50*time.Second {
		t.Fatalf("the replica's TTL after Extend(1m) is %v, %v: Extend returned before it was replicated", ttl, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock: %v", err)
	}
	if onReplica("in-step") {
		t.Fatal("Unlock returned before the replica had dropped the key")
	}

	short := mustLock(t, inStep.Mutex("renewed", dlock.TTL(600*time.Millisecond)), ctx)
	lostAt := make(chan time.Time, 1)
	go func() {
		<-short.Done()
		lostAt <- time.Now()
	}()
	held := mustLock(t, inStep.Mutex("held"), ctx)
	d.cut(t)

	t.Run("acquisition", func(t *testing.T) {
		start := time.Now()
		_, err := c.Mutex("cut").TryLock(ctx)
		if !errors.Is(err, dlock.ErrNotReplicated) || !strings.Contains(err.Error(), "0 of 1 replicas") {
			t.Fatalf("TryLock with the link cut: %v; want ErrNotReplicated, saying 0 of 1 replicas", err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Fatalf("TryLock took %v", took)
		}
		lockCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if _, err := c.Mutex("cut").Lock(lockCtx); !errors.Is(err, dlock.ErrNotReplicated) {
			t.Fatalf("Lock with the link cut: %v; want ErrNotReplicated before ctx ends", err)
		}
		// The undo is sent as the attempt fails, without waiting for its reply.
		for deadline := time.Now().Add(2 * time.Second); ; time.Sleep(10 * time.Millisecond) {
			if n, _ := d.rdb.Exists(ctx, "dlock:cut").Result(); n == 0 {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("the acquisition that was not replicated was not undone on the master")
			}
		}
	})
	t.Run("extend", func(t *testing.T) {
		before := held.ValidUntil()
		if err := held.Extend(ctx, time.Minute); !errors.Is(err, dlock.ErrNotReplicated) {
			t.Fatalf("Extend with the link cut: %v; want ErrNotReplicated", err)
		}
		if held.Err() != nil || held.ValidUntil().After(before) {
			t.Fatalf("after a failed Extend: Err %v, ValidUntil moved by %v", held.Err(), held.ValidUntil().Sub(before))
		}
	})
	t.Run("renewal", func(t *testing.T) {
		var at time.Time
		select {
		case at = <-lostAt:
		case <-time.After(5 * time.Second):
			t.Fatal("the lease whose renewals are not replicated was not lost within 5s")
		}
		if lateBy := at.Sub(short.ValidUntil()); !errors.Is(short.Err(), dlock.ErrLost) || lateBy > 100*time.Millisecond {
			t.Fatalf("lease: %v, seen lost %v after its ValidUntil; want ErrLost by then", short.Err(), lateBy)
		}
	})
	t.Run("unlock", func(t *testing.T) {
		err := held.Unlock(ctx)
		if !errors.Is(err, dlock.ErrNotReplicated) {
			t.Fatalf("Unlock with the link cut: %v; want ErrNotReplicated", err)
		}
		if !errors.Is(held.Err(), dlock.ErrReleased) {
			t.Fatalf("after Unlock: %v; want the lease ended (ErrReleased)", held.Err())
		}
		if n, _ := d.rdb.Exists(ctx, "dlock:held").Result(); n != 0 {
			t.Fatal("Unlock did not delete the key on the master")
		}
	})
}

// waitCounter counts the WAITs a client sends and the scripts in the same pipelines.
type waitCounter struct {
	mu                sync.Mutex
	waits, maxScripts int
}

func (h *waitCounter) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *waitCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }

func (h *waitCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		waits, scripts := 0, 0
		for _, cmd := range cmds {
			switch cmd.Name() {
			case "wait":
				waits++
			case "evalsha", "eval":
				scripts++
			}
		}
		h.mu.Lock()
		h.waits += waits
		if waits > 0 {
			h.maxScripts = max(h.maxScripts, scripts)
		}
		h.mu.Unlock()
		return next(ctx, cmds)
	}
}

// TestReplicaAcksOncePerRoundTrip: leases renewed together wait for the replicas once per
// pipeline, not once per lease; and without the option no WAIT is sent at all.
func TestReplicaAcksOncePerRoundTrip(t *testing.T) {
	t.Parallel()
	d := startReplicated(t)
	for _, acks := range []bool{true, false} {
		hook := &waitCounter{}
		rdb := d.master.Client(t)
		rdb.AddHook(hook)
		var opts []dlock.Option
		if acks {
			opts = append(opts, dlock.WithReplicaAcks(1, 500*time.Millisecond))
		}
		c := newClient(t, rdb, opts...)
		ctx := ctxTimeout(t, 30*time.Second)
		const leases = 20
		var held []*dlock.Lease
		for i := range leases {
			held = append(held, mustLock(t, c.Mutex("batch"+strings.Repeat("x", i), dlock.TTL(600*time.Millisecond)), ctx))
		}
		time.Sleep(500 * time.Millisecond) // a renewal or two
		for _, l := range held {
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		hook.mu.Lock()
		waits, most := hook.waits, hook.maxScripts
		hook.mu.Unlock()
		switch {
		case !acks && waits != 0:
			t.Fatalf("without WithReplicaAcks, %d WAITs were sent", waits)
		case acks && most < leases/2:
			t.Fatalf("with acks, the most scripts one WAIT covered was %d; want the renewals of one tick (%d leases) together", most, leases)
		case acks && waits >= 3*leases:
			t.Fatalf("%d WAITs for %d leases' Lock, renewals and Unlock: not once per round trip", waits, leases)
		}
		t.Logf("acks %v: %d WAITs, at most %d scripts under one", acks, waits, most)
	}
}

// TestFailoverWindow: with the replication link cut, a lock the master granted without
// acknowledgements is gone after a Sentinel failover, and a second holder gets it while
// the first still holds its lease; with WithReplicaAcks the acquisition fails instead.
func TestFailoverWindow(t *testing.T) {
	t.Parallel()
	var link *faultproxy.Proxy
	d := redistest.StartSentinel(t, redistest.WithReplicaLink(func(master string) string {
		link = faultproxy.New(t, master)
		return link.Addr
	}))
	ctx := ctxTimeout(t, time.Minute)
	first := newClient(t, d.Client(t))
	acked := newClient(t, d.Client(t), dlock.WithReplicaAcks(1, 500*time.Millisecond))
	second := newClient(t, d.Client(t))
	kept := mustLock(t, acked.Mutex("kept", dlock.TTL(10*time.Second)), ctx)

	link.Cut(t)
	lost := mustLock(t, first.Mutex("lost", dlock.TTL(10*time.Second)), ctx)
	if _, err := acked.Mutex("refused").TryLock(ctx); !errors.Is(err, dlock.ErrNotReplicated) {
		t.Fatalf("TryLock with acknowledgements and the link cut: %v; want ErrNotReplicated", err)
	}

	d.Failover(t)
	l, err := second.Mutex("lost").Lock(ctxTimeout(t, 10*time.Second))
	if err != nil {
		t.Fatalf("Lock after the failover: %v", err)
	}
	if time.Now().After(lost.ValidUntil()) {
		t.Fatalf("the second holder came after the first lease's ValidUntil: no window shown")
	}
	t.Logf("the failover window: a second holder of %q while the first holds it for %v more (tokens %d and %d)",
		"lost", time.Until(lost.ValidUntil()).Round(time.Millisecond), lost.Token(), l.Token())
	if _, err := second.Mutex("kept").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock of the lock acquired with acknowledgements, after the failover: %v; want ErrNotAcquired", err)
	}
	if err := kept.Extend(ctx, 10*time.Second); err != nil && !errors.Is(err, dlock.ErrNotReplicated) {
		t.Fatalf("Extend on the new master: %v", err)
	}
	_ = l.Unlock(ctx)
}

// TestReplicaAcksCluster: on a Cluster, each call's WAIT goes to the master of its key:
// with the replication of one master cut, a lock there fails with ErrNotReplicated while
// a lock on another master succeeds; and after a manual failover of that other master,
// the lease's Unlock follows the MOVED reply to the new master.
func TestReplicaAcksCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3, redistest.WithReplica())
	rdb := cl.Client(t)
	c := newClient(t, rdb, dlock.WithReplicaAcks(1, 500*time.Millisecond))
	ctx := ctxTimeout(t, time.Minute)
	cut, other := clusterName(t, rdb, cl, 0), clusterName(t, rdb, cl, 1)
	cl.CutReplication(t, 0)
	if _, err := c.Mutex(cut).TryLock(ctx); !errors.Is(err, dlock.ErrNotReplicated) {
		t.Fatalf("TryLock on the master whose replication is cut: %v; want ErrNotReplicated", err)
	}
	l, err := c.Mutex(other).TryLock(ctx)
	if err != nil {
		t.Fatalf("TryLock on a master whose replica is in step: %v", err)
	}
	cl.Failover(t, 1)
	if err := l.Unlock(ctx); err != nil {
		t.Fatalf("Unlock after its master failed over: %v", err)
	}
	if n, err := cl.Servers[1].Client(t).Exists(ctx, keysOf(other).Lock).Result(); err != nil || n != 0 {
		t.Fatalf("the new master still has the lock key after Unlock (%d, %v)", n, err)
	}
	l = mustLock(t, c.Mutex(other), ctx)
	_ = l.Unlock(ctx)
}

// clusterName returns a lock name whose keys master i of cl serves.
func clusterName(t *testing.T, rdb *redis.ClusterClient, cl *redistest.Cluster, i int) string {
	t.Helper()
	for n := range 10000 {
		name := "lock" + strconv.Itoa(n)
		slot, err := rdb.ClusterKeySlot(context.Background(), keysOf(name).Lock).Result()
		if err != nil {
			t.Fatalf("CLUSTER KEYSLOT: %v", err)
		}
		if int(slot)*len(cl.Servers)/16384 == i {
			return name
		}
	}
	t.Fatalf("no lock name on master %d", i)
	return ""
}

// TestReplicaAcksEveryKind: every kind of lock works with acknowledgements when two
// Clients (two processes, say) contend for it, hand-offs and grants included: a grant that
// a release passed on is confirmed by the grantee with an acknowledged attempt of its own.
func TestReplicaAcksEveryKind(t *testing.T) {
	t.Parallel()
	d := startReplicated(t)
	clients := []*dlock.Client{
		newClient(t, d.rdb, dlock.WithReplicaAcks(1, time.Second/2)),
		newClient(t, d.master.Client(t), dlock.WithReplicaAcks(1, time.Second/2)),
	}
	ctx := ctxTimeout(t, 30*time.Second)
	for _, kind := range []struct {
		name string
		lock func(c *dlock.Client) (*dlock.Lease, error)
	}{
		{"Mutex", func(c *dlock.Client) (*dlock.Lease, error) { return c.Mutex("kind:m").Lock(ctx) }},
		{"FairMutex", func(c *dlock.Client) (*dlock.Lease, error) { return c.FairMutex("kind:f").Lock(ctx) }},
		{"RWMutex", func(c *dlock.Client) (*dlock.Lease, error) { return c.RWMutex("kind:rw").Lock(ctx) }},
		{"Semaphore", func(c *dlock.Client) (*dlock.Lease, error) { return c.Semaphore("kind:s", 1).Acquire(ctx, 1) }},
	} {
		var wg sync.WaitGroup
		var holders, overlaps atomic.Int64
		for i := range 4 {
			wg.Go(func() {
				for range 10 {
					l, err := kind.lock(clients[i%2])
					if err != nil {
						t.Errorf("%s: %v", kind.name, err)
						return
					}
					if holders.Add(1) > 1 {
						overlaps.Add(1)
					}
					time.Sleep(time.Millisecond)
					holders.Add(-1)
					if err := l.Unlock(ctx); err != nil {
						t.Errorf("%s: Unlock: %v", kind.name, err)
					}
				}
			})
		}
		wg.Wait()
		if n := overlaps.Load(); n > 0 {
			t.Errorf("%s: %d holds began while another was held", kind.name, n)
		}
	}
}

// TestAOFAcksInvalid: WithAOFAcks says what is wrong with its arguments.
func TestAOFAcksInvalid(t *testing.T) {
	srv := redistest.Start(t)
	for _, tc := range []struct {
		name    string
		opt     dlock.Option
		message string
	}{
		{"nothing asked", dlock.WithAOFAcks(0, 0, time.Second), "one of them must be asked for"},
		{"local above 1", dlock.WithAOFAcks(2, 0, time.Second), "local must be 0 or 1"},
		{"negative replicas", dlock.WithAOFAcks(1, -1, time.Second), "replicas at least 0"},
		{"zero timeout", dlock.WithAOFAcks(1, 1, 0), "between 1ms and 10s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := newClient(t, srv.Client(t), tc.opt).Mutex("m").TryLock(context.Background())
			if err == nil || !strings.HasPrefix(err.Error(), "dlock: WithAOFAcks") || !strings.Contains(err.Error(), tc.message) {
				t.Fatalf("TryLock: %v; want an error about WithAOFAcks that says %q", err, tc.message)
			}
		})
	}
}

// TestAOFAcksRefusedWithoutWAITAOF: on a server without WAITAOF (before Redis 7.2, such as
// Debian's 7.0), every acquisition under WithAOFAcks fails with an error that says so and
// wraps ErrNotReplicated, and is undone: no key is left. A server with WAITAOF could not be
// had here, so its success path is untested.
func TestAOFAcksRefusedWithoutWAITAOF(t *testing.T) {
	t.Parallel()
	d := startReplicated(t)
	ctx := ctxTimeout(t, 20*time.Second)
	if err := d.rdb.Do(ctx, "waitaof", 0, 0, 0).Err(); err == nil || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("WAITAOF on this server: %v; this test needs a server without it (before Redis 7.2)", err)
	}
	for _, opt := range []dlock.Option{dlock.WithAOFAcks(1, 0, 500*time.Millisecond), dlock.WithAOFAcks(0, 1, 500*time.Millisecond)} {
		c := newClient(t, d.rdb, opt)
		_, err := c.Mutex("aof").TryLock(ctx)
		if !errors.Is(err, dlock.ErrNotReplicated) || !strings.Contains(err.Error(), "the server has no WAITAOF") {
			t.Fatalf("TryLock: %v; want ErrNotReplicated saying the server has no WAITAOF", err)
		}
		if n := awaitKeys(t, d.rdb, "dlock:aof", 0); n != 0 {
			t.Fatalf("the refused acquisition left its key behind")
		}
	}
}

// awaitKeys waits up to a few seconds (the undo of a refused attempt is sent without
// waiting for its reply) for the number of keys named key to be want, and returns it.
func awaitKeys(t *testing.T, rdb redis.UniversalClient, key string, want int64) int64 {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for {
		n, err := rdb.Exists(context.Background(), key).Result()
		if err != nil {
			t.Fatalf("EXISTS %s: %v", key, err)
		}
		if n == want || time.Now().After(deadline) {
			return n
		}
		time.Sleep(20 * time.Millisecond)
	}
}
