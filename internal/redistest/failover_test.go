package redistest_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/faultproxy"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestSentinelFailoverWindow: with the replication link cut, a write the master
// acknowledged is lost when the Sentinels promote the replica, and WAIT is what tells
// the two apart; the failover client follows the new master.
func TestSentinelFailoverWindow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	var link *faultproxy.Proxy
	d := redistest.StartSentinel(t, redistest.WithReplicaLink(func(master string) string {
		link = faultproxy.New(t, master)
		return link.Addr
	}))
	old := d.Master
	c := d.Client(t)
	mustSet(t, c, "kept")
	if n, err := c.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
		t.Fatalf("WAIT 1 through the replica link = %d, %v; want 1", n, err)
	}
	link.Cut(t)
	mustSet(t, c, "lost")
	if n, err := c.Wait(ctx, 1, 200*time.Millisecond).Result(); err != nil || n != 0 {
		t.Fatalf("WAIT 1 with the replica link cut = %d, %v; want 0", n, err)
	}

	d.Failover(t)
	if d.Master == old || d.Replica != old {
		t.Fatalf("after Failover, Master %s and Replica %s; want them swapped", d.Master.Addr, d.Replica.Addr)
	}
	awaitValue(t, c, "kept", "kept")
	awaitValue(t, c, "lost", "") // the failover window: an acknowledged write is gone
	mustSet(t, c, "after")
}

// TestClusterFailover: a Cluster started WithReplica keeps every key across a manual
// failover and across its new master being killed (SIGKILL); the cluster client follows.
func TestClusterFailover(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cl := redistest.StartCluster(t, 3, redistest.WithReplica())
	if len(cl.Replicas) != 3 {
		t.Fatalf("%d replicas, want 3", len(cl.Replicas))
	}
	// go-redis reloads a Cluster's slots on MOVED, but after a dead master only every
	// ClusterStateReloadInterval (60 s by default): a short one lets it find the replica
	// that took over.
	opts := cl.Options()
	opts.ClusterStateReloadInterval = 500 * time.Millisecond
	c := redis.NewClusterClient(opts)
	t.Cleanup(func() { c.Close() })
	keys := make([]string, 30)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%d", i)
		mustSet(t, c, keys[i])
	}
	for _, s := range cl.Servers {
		if n, err := s.Client(t).Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
			t.Fatalf("%s: WAIT 1 = %d, %v; want its replica's acknowledgement", s.Addr, n, err)
		}
	}
	first := cl.Servers[0]
	cl.Failover(t, 0)
	if cl.Replicas[0] != first || cl.Addrs[0] != cl.Servers[0].Addr {
		t.Fatalf("after Failover, Servers[0] %s, Replicas[0] %s, Addrs[0] %s", cl.Servers[0].Addr, cl.Replicas[0].Addr, cl.Addrs[0])
	}
	for _, k := range keys {
		awaitValue(t, c, k, k)
	}
	cl.Servers[0].Kill(t)
	cl.AwaitFailover(t, 0)
	if cl.Servers[0] != first {
		t.Fatalf("after the kill, Servers[0] is %s, want the first master %s back", cl.Servers[0].Addr, first.Addr)
	}
	for _, k := range keys {
		awaitValue(t, c, k, k)
	}
}

func mustSet(t *testing.T, c redis.UniversalClient, k string) {
	t.Helper()
	if err := c.Set(context.Background(), k, k, 0).Err(); err != nil {
		t.Fatalf("SET %s: %v", k, err)
	}
}

// awaitValue waits up to 20 s for the client to read want at k ("" for no key): a client
// learns of a failover a moment after it happened.
func awaitValue(t *testing.T, c redis.UniversalClient, k, want string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		got, err := c.Get(context.Background(), k).Result()
		if err == redis.Nil {
			err = nil
		}
		if err == nil && got == want {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s = %q, %v; want %q", k, got, err, want)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
