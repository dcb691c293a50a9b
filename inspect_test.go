package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// background runs acquire in a goroutine (a contender) and returns what it got; the
// test's cleanup waits for it.
func background(t *testing.T, ctx context.Context, acquire func(context.Context) (*dlock.Lease, error)) <-chan *dlock.Lease {
	t.Helper()
	got := make(chan *dlock.Lease, 1)
	done := make(chan struct{})
	go func() {
		defer close(done)
		l, err := acquire(ctx)
		if err != nil && ctx.Err() == nil {
			t.Errorf("contender: %v", err)
		}
		got <- l
	}()
	t.Cleanup(func() { <-done })
	return got
}

// inspectUntil inspects name until ok holds for it, and fails the test after a while.
func inspectUntil(t *testing.T, c *dlock.Client, name, what string, ok func(*dlock.LockInfo) bool) *dlock.LockInfo {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		in, err := c.Inspect(context.Background(), name)
		if err != nil {
			t.Fatalf("Inspect(%q): %v", name, err)
		}
		if ok(in) {
			return in
		}
		if time.Now().After(deadline) {
			t.Fatalf("Inspect(%q): never %s: %+v", name, what, in)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func checkHolder(t *testing.T, h dlock.Holder, reader bool, permits int64, ttl time.Duration) {
	t.Helper()
	checkHolderToken(t, h, 48, reader, permits, ttl) // the Client's id, then 128 random bits
}

// checkHolderToken is checkHolder for a token of digits hex digits.
func checkHolderToken(t *testing.T, h dlock.Holder, digits int, reader bool, permits int64, ttl time.Duration) {
	t.Helper()
	if len(h.Token) != digits || h.Reader != reader || h.Permits != permits || h.TTL <= 0 || h.TTL > ttl {
		t.Fatalf("holder %+v: want a %d-digit token, reader %v, %d permits, TTL in (0, %v]", h, digits, reader, permits, ttl)
	}
}

func TestInspectFree(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	in, err := c.Inspect(context.Background(), "nothing")
	if err != nil {
		t.Fatal(err)
	}
	if in.Kind != "" || in.Held() || in.Fence != 0 || len(in.Waiters) != 0 || in.Key != "dlock:nothing" || len(in.Nodes) != 1 {
		t.Fatalf("Inspect of a free lock: %+v", in)
	}
	if _, err := c.Inspect(context.Background(), ""); err == nil {
		t.Fatal("Inspect accepted an empty name")
	}
}

// TestInspectForceUnlockKinds: each kind held and contended shows its kind, holders, time
// left, fence and waiters; ForceUnlock removes it, the holder's lease is lost at its next
// renewal, the fence stays, and the contender gets the lock with a larger token.
func TestInspectForceUnlockKinds(t *testing.T) {
	t.Parallel()
	const ttl = 600 * time.Millisecond // renewed every 200ms: the loss shows quickly
	for _, tt := range []struct {
		kind    string
		hold    func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error)
		contend func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error)
		check   func(t *testing.T, in *dlock.LockInfo)
	}{
		{
			kind: dlock.KindMutex,
			hold: func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) {
				return c.Mutex("k", dlock.TTL(ttl)).Lock(ctx)
			},
			contend: func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) {
				return c.Mutex("k", dlock.TTL(ttl)).Lock(ctx)
			},
			check: func(t *testing.T, in *dlock.LockInfo) {
				checkHolder(t, in.Holders[0], false, 1, ttl)
			},
		},
		{
			kind: dlock.KindFair,
			hold: func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) {
				return c.FairMutex("k", dlock.TTL(ttl)).Lock(ctx)
			},
			contend: func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) {
				return c.FairMutex("k", dlock.TTL(ttl)).Lock(ctx)
			},
			check: func(t *testing.T, in *dlock.LockInfo) {
				checkHolder(t, in.Holders[0], false, 1, ttl)
			},
		},
		{
			kind: dlock.KindRWMutex,
			hold: func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) {
				return c.RWMutex("k", dlock.TTL(ttl)).RLock(ctx)
			},
			contend: func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) {
				return c.RWMutex("k", dlock.TTL(ttl)).Lock(ctx)
			},
			check: func(t *testing.T, in *dlock.LockInfo) {
				checkHolder(t, in.Holders[0], true, 1, ttl)
			},
		},
		{
			kind: dlock.KindSemaphore,
			hold: func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) {
				return c.Semaphore("k", 3, dlock.TTL(ttl)).Acquire(ctx, 2)
			},
			contend: func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) {
				return c.Semaphore("k", 3, dlock.TTL(ttl)).Acquire(ctx, 2)
			},
			check: func(t *testing.T, in *dlock.LockInfo) {
				checkHolder(t, in.Holders[0], false, 2, ttl)
			},
		},
	} {
		t.Run(tt.kind, func(t *testing.T) {
			t.Parallel()
			_, rdb := standalone(t)
			holder, contender, operator := newClient(t, rdb), newClient(t, rdb), newClient(t, rdb)
			ctx := ctxTimeout(t, 20*time.Second)
			lease, err := tt.hold(holder, ctx)
			if err != nil {
				t.Fatal(err)
			}
			got := background(t, ctx, func(ctx context.Context) (*dlock.Lease, error) { return tt.contend(contender, ctx) })
			in := inspectUntil(t, operator, "k", "contended", func(in *dlock.LockInfo) bool {
				return len(in.Waiters) == 1 || (tt.kind == dlock.KindMutex && in.Nodes[0].Listeners > 0)
			})
			if in.Kind != tt.kind || len(in.Holders) != 1 || in.Fence != lease.Token() {
				t.Fatalf("Inspect: %+v, want kind %s, one holder, fence %d", in, tt.kind, lease.Token())
			}
			tt.check(t, in)

			removed, err := operator.ForceUnlock(ctx, "k")
			if err != nil {
				t.Fatal(err)
			}
			if removed.Kind != tt.kind || len(removed.Holders) != 1 || removed.Holders[0].Token != in.Holders[0].Token {
				t.Fatalf("ForceUnlock removed %+v, want the holder Inspect saw: %+v", removed, in)
			}
			waitClosed(t, lease.Done(), 5*time.Second, "the holder's lease to end")
			if !errors.Is(lease.Err(), dlock.ErrLost) {
				t.Fatalf("the holder's lease ended with %v, want ErrLost", lease.Err())
			}
			select {
			case next := <-got:
				if next == nil || next.Token() <= lease.Token() {
					t.Fatalf("the contender got %v after a force-unlock of token %d", next, lease.Token())
				}
				after := inspectUntil(t, operator, "k", "held by the contender", func(in *dlock.LockInfo) bool { return in.Held() })
				if after.Fence != next.Token() {
					t.Fatalf("fence %d after the contender took token %d", after.Fence, next.Token())
				}
				_ = next.Unlock(ctx)
			case <-time.After(5 * time.Second):
				t.Fatal("the contender did not get the lock after ForceUnlock")
			}
			if again, err := operator.ForceUnlock(ctx, "k"); err != nil || again.Held() {
				t.Fatalf("ForceUnlock of a free lock: %+v, %v", again, err)
			}
		})
	}
}

// TestInspectRWMutexWriters: a writer that waits for readers is a waiter; a writer
// holding with a reader (a downgrade) shows both.
func TestInspectRWMutexWriters(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	c, other := newClient(t, rdb), newClient(t, rdb)
	ctx := ctxTimeout(t, 20*time.Second)
	w, err := c.RWMutex("doc").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	r, err := c.RWMutex("doc").RLock(w.Context())
	if err != nil {
		t.Fatal(err)
	}
	in, err := other.Inspect(ctx, "doc")
	if err != nil {
		t.Fatal(err)
	}
	if in.Kind != dlock.KindRWMutex || len(in.Holders) != 2 || in.Holders[0].Reader || !in.Holders[1].Reader {
		t.Fatalf("Inspect of a writer with a reader: %+v", in)
	}
	_ = r.Unlock(ctx)
	_ = w.Unlock(ctx)
}

func TestInspectForceUnlockWrongType(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	rdb.HSet(ctx, "dlock:weird", "f", "v")
	rdb.Set(ctx, "{dlock:odd}:queue", "x", 0)
	for _, name := range []string{"weird", "odd"} {
		for op, call := range map[string]func(context.Context, string) (*dlock.LockInfo, error){"Inspect": c.Inspect, "ForceUnlock": c.ForceUnlock} {
			_, err := call(ctx, name)
			var ne *dlock.NodeError
			if !errors.Is(err, dlock.ErrNotLock) || !errors.As(err, &ne) {
				t.Fatalf("%s(%q) = %v, want ErrNotLock in a NodeError", op, name, err)
			}
		}
	}
	if rdb.Exists(ctx, "dlock:weird", "{dlock:odd}:queue").Val() != 2 {
		t.Fatal("ForceUnlock removed a key that is not a lock's")
	}
}

func TestInspectForceUnlockCluster(t *testing.T) {
	t.Parallel()
	cc := redistest.StartCluster(t, 3).Client(t)
	holder, operator := newClient(t, cc), newClient(t, cc)
	ctx := ctxTimeout(t, 20*time.Second)
	lease, err := holder.Semaphore("c", 2, dlock.TTL(600*time.Millisecond)).Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	in, err := operator.Inspect(ctx, "c")
	if err != nil || in.Kind != dlock.KindSemaphore || len(in.Holders) != 1 || in.Fence != lease.Token() {
		t.Fatalf("Inspect on a Cluster: %+v, %v", in, err)
	}
	if _, err := operator.ForceUnlock(ctx, "c"); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, lease.Done(), 5*time.Second, "the holder's lease to end")
	if !errors.Is(lease.Err(), dlock.ErrLost) {
		t.Fatalf("lease ended with %v, want ErrLost", lease.Err())
	}
}

// TestInspectForceUnlockQuorum: the summary lists the holder of a majority; a node down
// gives the others' reports with a QuorumError that names it.
func TestInspectForceUnlockQuorum(t *testing.T) {
	t.Parallel()
	servers, nodes, c := quorumOf(t, 3)
	ctx := ctxTimeout(t, 20*time.Second)
	lease, err := c.Mutex("q", dlock.TTL(time.Minute)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	// A stray key on one node only is no holder of the quorum.
	nodes[2].(*redis.Client).Del(ctx, "dlock:q")
	nodes[2].(*redis.Client).Set(ctx, "dlock:q", "stray", 0)
	in, err := c.Inspect(ctx, "q")
	if err != nil {
		t.Fatal(err)
	}
	if len(in.Nodes) != 3 || len(in.Holders) != 1 || in.Holders[0].Token == "stray" || in.Fence != lease.Token() {
		t.Fatalf("Inspect on a quorum: %+v", in)
	}
	if h := in.Nodes[2].Holders; len(h) != 1 || h[0].Token != "stray" || h[0].TTL != -1 {
		t.Fatalf("node 3: %+v", in.Nodes[2])
	}
	for i, n := range in.Nodes {
		if n.Addr != servers[i].Addr || n.Kind != dlock.KindMutex {
			t.Fatalf("node %d: %+v", i, n)
		}
	}
	servers[1].Kill(t)
	removed, err := c.ForceUnlock(ctx, "q")
	var qe *dlock.QuorumError
	if !errors.As(err, &qe) || qe.Agreed != 2 || len(qe.Nodes) != 1 || qe.Nodes[0].Addr != servers[1].Addr {
		t.Fatalf("ForceUnlock with a node down: %v", err)
	}
	if removed == nil || removed.Nodes[1].Err == nil || len(removed.Nodes[0].Holders) != 1 {
		t.Fatalf("ForceUnlock's report with a node down: %+v", removed)
	}
	if nodes[0].Exists(ctx, "dlock:q").Val() != 0 || nodes[2].Exists(ctx, "dlock:q").Val() != 0 {
		t.Fatal("the lock is still on a node that answered")
	}
}
