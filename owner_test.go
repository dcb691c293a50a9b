package dlock_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// ownedKinds take a lock of each kind on client under name and return its lease; the
// TimestampMutex is left out: its key holds a deadline, which names no owner.
var ownedKinds = []struct {
	kind string
	take func(ctx context.Context, c *dlock.Client, name string) (*dlock.Lease, error)
}{
	{dlock.KindMutex, func(ctx context.Context, c *dlock.Client, n string) (*dlock.Lease, error) {
		return c.Mutex(n).Lock(ctx)
	}},
	{dlock.KindFair, func(ctx context.Context, c *dlock.Client, n string) (*dlock.Lease, error) {
		return c.FairMutex(n).Lock(ctx)
	}},
	{"write", func(ctx context.Context, c *dlock.Client, n string) (*dlock.Lease, error) {
		return c.RWMutex(n).Lock(ctx)
	}},
	{"read", func(ctx context.Context, c *dlock.Client, n string) (*dlock.Lease, error) {
		return c.RWMutex(n).RLock(ctx)
	}},
	{dlock.KindSemaphore, func(ctx context.Context, c *dlock.Client, n string) (*dlock.Lease, error) {
		return c.Semaphore(n, 3).Acquire(ctx, 2)
	}},
	{"multi", func(ctx context.Context, c *dlock.Client, n string) (*dlock.Lease, error) {
		return c.MultiMutex([]string{n, "{" + n + "}:other"}).Lock(ctx)
	}},
}

// TestOwnerShownByInspect: every kind's holder is shown with its Client's owner name, to
// another Client, on one server, a Cluster and a quorum (where the FairMutex is refused).
func TestOwnerShownByInspect(t *testing.T) {
	t.Parallel()
	deployments := []struct {
		name string
		make func(t *testing.T, opts ...dlock.Option) *dlock.Client
	}{
		{"standalone", func(t *testing.T, opts ...dlock.Option) *dlock.Client {
			_, rdb := standalone(t)
			return newClient(t, rdb, opts...)
		}},
		{"cluster", func(t *testing.T, opts ...dlock.Option) *dlock.Client {
			return newClient(t, redistest.StartCluster(t, 3).Client(t), opts...)
		}},
		{"quorum", func(t *testing.T, opts ...dlock.Option) *dlock.Client {
			servers := redistest.StartNodes(t, 3)
			nodes := make([]redis.UniversalClient, len(servers))
			for i, s := range servers {
				nodes[i] = s.Client(t)
			}
			c := newQuorumClient(t, nodes, opts...)
			return c
		}},
	}
	for _, d := range deployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			holder := d.make(t, dlock.WithOwner("batch-7 (nightly)"))
			ctx := ctxTimeout(t, 20*time.Second)
			for _, k := range ownedKinds {
				if k.kind == dlock.KindFair && d.name == "quorum" {
					continue
				}
				lease, err := k.take(ctx, holder, "owned:"+k.kind)
				if err != nil {
					t.Fatalf("%s: %v", k.kind, err)
				}
				in, err := holder.Inspect(ctx, "owned:"+k.kind)
				if err != nil || len(in.Holders) != 1 {
					t.Fatalf("%s: Inspect: %+v, %v", k.kind, in, err)
				}
				if h := in.Holders[0]; h.Owner != "batch-7 (nightly)" || len(h.Token) != 48 {
					t.Errorf("%s: holder %+v: want owner %q and a 48-digit token", k.kind, h, "batch-7 (nightly)")
				}
				for _, n := range in.Nodes {
					if len(n.Holders) == 1 && n.Holders[0].Owner != "batch-7 (nightly)" {
						t.Errorf("%s: node %s: holder %+v has no owner", k.kind, n.Addr, n.Holders[0])
					}
				}
				if err := lease.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
		})
	}
}

// TestOwnerDefaultIsHostAndPid: a Client given no owner names its holders "host:pid".
func TestOwnerDefaultIsHostAndPid(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 5*time.Second)
	lease := mustLock(t, c.Mutex("default-owner"), ctx)
	defer lease.Unlock(ctx)
	in, err := c.Inspect(ctx, "default-owner")
	if err != nil {
		t.Fatal(err)
	}
	if want := defaultOwner(t); in.Holders[0].Owner != want {
		t.Fatalf("owner %q, want %q", in.Holders[0].Owner, want)
	}
}

// TestOwnerNoneWritesNothing: WithOwner("") keeps plain 128-bit tokens and writes no key
// but the lock's own; the TimestampMutex, whose key holds a deadline, shows no owner.
func TestOwnerNoneWritesNothing(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 5*time.Second)
	c := newClient(t, rdb, dlock.WithOwner(""))
	lease := mustLock(t, c.Mutex("anonymous"), ctx)
	in, err := c.Inspect(ctx, "anonymous")
	if err != nil {
		t.Fatal(err)
	}
	checkHolderToken(t, in.Holders[0], 32, false, 1, dlock.DefaultTTL)
	if in.Holders[0].Owner != "" {
		t.Fatalf("owner %q with WithOwner(\"\")", in.Holders[0].Owner)
	}
	if keys := rdb.Keys(ctx, "*owner*").Val(); len(keys) != 0 {
		t.Fatalf("owner keys written with WithOwner(\"\"): %v", keys)
	}
	_ = lease.Unlock(ctx)

	named := newClient(t, rdb, dlock.WithOwner("stamps"))
	stamp, err := named.TimestampMutex("stamped").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer stamp.Unlock(ctx)
	if in, err = named.Inspect(ctx, "stamped"); err != nil || in.Holders[0].Owner != "" {
		t.Fatalf("TimestampMutex holder: %+v, %v; want no owner", in, err)
	}
}

// TestOwnerTokenKeepsInterop: a Mutex's key holds a plain string, its Client's id and
// then 128 random bits in hex, which a compare-and-delete of another library releases.
func TestOwnerTokenKeepsInterop(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 5*time.Second)
	c := newClient(t, rdb, dlock.WithOwner("interop"), dlock.WithPrefix(""))
	seen := map[string]bool{}
	var id string
	for range 3 {
		lease := mustLock(t, c.Mutex("plain", dlock.TTL(300*time.Millisecond)), ctx)
		token, err := rdb.Get(ctx, "plain").Result()
		if err != nil || len(token) != 48 || strings.Trim(token, "0123456789abcdef") != "" {
			t.Fatalf("lock key holds %q, %v: want 48 hex digits", token, err)
		}
		if id != "" && token[:16] != id {
			t.Fatalf("token %q does not begin with the Client's id %q", token, id)
		}
		id = token[:16]
		if seen[token[16:]] {
			t.Fatalf("random part %q repeated", token[16:])
		}
		seen[token[16:]] = true
		// What redsync and node-redlock do to release: compare and delete.
		del := redis.NewScript(`if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end return 0`)
		if n, err := del.Run(ctx, rdb, []string{"plain"}, token).Int(); err != nil || n != 1 {
			t.Fatalf("compare-and-delete of %q: %d, %v", token, n, err)
		}
		<-lease.Done() // its next renewal finds the key gone
	}
}

// TestOwnerCostsNoRoundTrip: 50 Lock+Unlock pairs take as many round trips with an owner
// as without, one of which carries the owner key's only write; the key lasts the lease
// plus a minute.
func TestOwnerCostsNoRoundTrip(t *testing.T) {
	t.Parallel()
	ctx := ctxTimeout(t, 10*time.Second)
	pairs := func(opts ...dlock.Option) (rdb *redis.Client, ownerWrites, roundTrips int) {
		_, rdb = standalone(t)
		var mu sync.Mutex
		rdb.AddHook(countHook{func(cmds []redis.Cmder) {
			mu.Lock()
			defer mu.Unlock()
			if name := cmds[0].Name(); name == "hello" || name == "client" {
				return // a connection's set-up: the lanes may open one more now and then
			}
			roundTrips++
			for _, cmd := range cmds {
				for _, arg := range cmd.Args() {
					if s, ok := arg.(string); ok && strings.HasSuffix(s, "}:owner") && cmd.Err() == nil {
						ownerWrites++ // a successful run of owner.lua (a NOSCRIPT retry counts once)
					}
				}
			}
		}})
		m := newClient(t, rdb, opts...).Mutex("cheap", dlock.TTL(time.Second))
		for range 50 {
			if err := mustLock(t, m, ctx).Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		return rdb, ownerWrites, roundTrips
	}
	_, _, without := pairs(dlock.WithOwner(""))
	rdb, writes, with := pairs(dlock.WithOwner("counted"))
	if writes != 1 || with != without {
		t.Fatalf("50 Lock+Unlock pairs: %d owner writes and %d round trips; want 1 and %d, as without an owner", writes, with, without)
	}
	keys := rdb.Keys(ctx, "*:owner").Val()
	if len(keys) != 1 {
		t.Fatalf("owner keys %v", keys)
	}
	if pttl := rdb.PTTL(ctx, keys[0]).Val(); pttl <= 50*time.Second || pttl > time.Second+time.Minute {
		t.Fatalf("owner key lasts %v, want about the TTL and a minute", pttl)
	}
}

// countHook calls seen with the commands of every round trip, single or pipelined, once
// they are answered.
type countHook struct{ seen func([]redis.Cmder) }

func (countHook) DialHook(next redis.DialHook) redis.DialHook { return next }
func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.seen([]redis.Cmder{cmd})
		return err
	}
}
func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		h.seen(cmds)
		return err
	}
}

// TestOwnerInvalid: an owner name too long, not UTF-8 or with a control character is
// refused with an error that says what is wrong, by NewQuorum and by New's first call.
func TestOwnerInvalid(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	for _, tt := range []struct{ owner, want string }{
		{strings.Repeat("x", dlock.MaxOwnerLen+1), "129 bytes long: at most 128"},
		{"bad\xffname", "not valid UTF-8"},
		{"two\nlines", "control character"},
	} {
		if _, err := dlock.NewQuorum([]redis.UniversalClient{rdb}, dlock.WithOwner(tt.owner)); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("NewQuorum with owner %q: %v, want %q", tt.owner, err, tt.want)
		}
		c := dlock.New(rdb, dlock.WithOwner(tt.owner))
		if _, err := c.Mutex("x").TryLock(context.Background()); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("New with owner %q, TryLock: %v, want %q", tt.owner, err, tt.want)
		}
	}
	c, err := dlock.NewQuorum([]redis.UniversalClient{rdb}, dlock.WithOwner(strings.Repeat("é", dlock.MaxOwnerLen/2)))
	if err != nil {
		t.Fatalf("an owner of exactly %d bytes: %v", dlock.MaxOwnerLen, err)
	}
	_ = c.Close()
}

// TestOwnerInEvents: every event of a hold carries the Client's owner name.
func TestOwnerInEvents(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	var mu sync.Mutex
	owners := map[string]string{}
	note := func(event, owner string) {
		mu.Lock()
		defer mu.Unlock()
		owners[event] = owner
	}
	c := newClient(t, rdb, dlock.WithOwner("observed"), dlock.WithObserver(dlock.Observer{
		WaitStarted: func(e dlock.WaitStart) { note("WaitStarted", e.Owner) },
		Attempted:   func(e dlock.Attempt) { note("Attempted", e.Owner) },
		WaitEnded:   func(e dlock.WaitEnd) { note("WaitEnded", e.Owner) },
		HoldEnded:   func(e dlock.HoldEnd) { note("HoldEnded", e.Owner) },
	}))
	ctx := ctxTimeout(t, 5*time.Second)
	if err := mustLock(t, c.Mutex("events"), ctx).Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for _, ev := range []string{"WaitStarted", "Attempted", "WaitEnded", "HoldEnded"} {
		if owners[ev] != "observed" {
			t.Errorf("%s carried owner %q, want %q", ev, owners[ev], "observed")
		}
	}
}

// TestOwnerKeyGoneAfterClose: Close deletes the owner key it wrote, on every node.
func TestOwnerKeyGoneAfterClose(t *testing.T) {
	t.Parallel()
	servers := redistest.StartNodes(t, 3)
	nodes := make([]redis.UniversalClient, len(servers))
	for i, s := range servers {
		nodes[i] = s.Client(t)
	}
	c, err := dlock.NewQuorum(nodes, dlock.WithOwner("closing"))
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxTimeout(t, 10*time.Second)
	lease := mustLock(t, c.Mutex("closing"), ctx) // still held at Close: released there
	waitFor(t, 5*time.Second, "the owner key on every node", func() bool {
		for _, n := range nodes {
			if len(n.Keys(ctx, "*:owner").Val()) != 1 {
				return false
			}
		}
		return true
	})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if lease.Err() == nil {
		t.Fatal("the lease outlived Close")
	}
	for i, n := range nodes {
		if keys := n.Keys(ctx, "*:owner").Val(); len(keys) != 0 {
			t.Errorf("node %d keeps %v after Close", i, keys)
		}
	}
}

// TestOwnerOutlivesExtendedLease: a lease extended far beyond its TTL, with no renewal,
// keeps its owner's label at least as long.
func TestOwnerOutlivesExtendedLease(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 10*time.Second)
	c := newClient(t, rdb, dlock.WithOwner("long-job"))
	lease := mustLock(t, c.Mutex("long", dlock.TTL(time.Second), dlock.NoRenew()), ctx)
	defer lease.Unlock(ctx)
	if err := lease.Extend(ctx, time.Hour); err != nil {
		t.Fatal(err)
	}
	keys := rdb.Keys(ctx, "*:owner").Val()
	if len(keys) != 1 {
		t.Fatalf("owner keys %v", keys)
	}
	if pttl := rdb.PTTL(ctx, keys[0]).Val(); pttl < time.Hour {
		t.Fatalf("owner key lasts %v, less than the lease's hour", pttl)
	}
}
