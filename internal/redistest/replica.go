package redistest

import (
	"context"
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// replicaTimeout bounds the wait for a replica's first sync.
const replicaTimeout = 20 * time.Second

// StartReplica starts a server (as Start does, with opts) that replicates from the master
// at masterAddr (a Server's Addr, or a proxy in front of it), and returns once its link to
// the master is up and it has synced. It fails the test if that does not happen within
// 20 s. Start the master with WithArgs("--repl-diskless-sync-delay", "0"), or the first
// sync waits 5 s for more replicas to share it.
func StartReplica(tb testing.TB, masterAddr string, opts ...Option) *Server {
	tb.Helper()
	host, port, err := net.SplitHostPort(masterAddr)
	if err != nil {
		tb.Fatalf("redistest: StartReplica(%q): %v", masterAddr, err)
	}
	args := []string{"--replicaof", host, port}
	if pw := newConfig(opts).password; pw != "" {
		args = append(args, "--masterauth", pw)
	}
	r := Start(tb, append(slices.Clip(opts), WithArgs(args...))...)
	c := redis.NewClient(r.Options())
	defer c.Close()
	if err := await(replicaTimeout, func(ctx context.Context) error { return linkUp(ctx, c) }); err != nil {
		tb.Fatalf("redistest: replica %s of %s: %v%s", r.Addr, masterAddr, err, logTails(r))
	}
	return r
}

// linkUp returns nil if the replica c says its link to the master is up.
func linkUp(ctx context.Context, c *redis.Client) error {
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("INFO: %w", err)
	}
	if st := infoField(info, "master_link_status"); st != "up" {
		return fmt.Errorf("master_link_status:%s", st)
	}
	return nil
}

// cutUser is the user a replica cut off by CutReplication authenticates as: the master
// has no such user, so it refuses every attempt of the replica to reconnect.
const cutUser = "redistest-replication-cut"

// CutReplication cuts the replication link of master i of a Cluster started WithReplica,
// and of nothing else: its replica's link is closed (CLIENT KILL TYPE master) and each
// attempt to reconnect is refused (the replica now authenticates as a user the master
// does not have), while the cluster bus and the clients' connections stay up. It returns
// once the master has no replica connected: a write from then on reaches no replica,
// until RestoreReplication. A Cluster's replica replicates from the address the cluster
// bus gave it, so this is its counterpart of a proxy on the link (WithReplicaLink).
func (c *Cluster) CutReplication(tb testing.TB, i int) {
	tb.Helper()
	r := c.replica(tb, i)
	rc := redis.NewClient(r.Options())
	defer rc.Close()
	ctx := context.Background()
	for _, kv := range [][2]string{{"masteruser", cutUser}, {"masterauth", "cut"}} {
		if err := rc.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			tb.Fatalf("redistest: replica %s: CONFIG SET %s: %v", r.Addr, kv[0], err)
		}
	}
	if err := rc.Do(ctx, "CLIENT", "KILL", "TYPE", "master").Err(); err != nil {
		tb.Fatalf("redistest: replica %s: CLIENT KILL TYPE master: %v", r.Addr, err)
	}
	mc := redis.NewClient(c.Servers[i].Options())
	defer mc.Close()
	err := await(replicaTimeout, func(ctx context.Context) error {
		info, err := mc.Info(ctx, "replication").Result()
		if err != nil {
			return fmt.Errorf("INFO: %w", err)
		}
		if n := infoField(info, "connected_slaves"); n != "0" {
			return fmt.Errorf("connected_slaves:%s", n)
		}
		return nil
	})
	if err != nil {
		tb.Fatalf("redistest: cutting the replication of %s: %v", c.Servers[i].Addr, err)
	}
}

// RestoreReplication undoes CutReplication: the replica authenticates as before and
// reconnects. It returns once the replica's link is up again.
func (c *Cluster) RestoreReplication(tb testing.TB, i int) {
	tb.Helper()
	r := c.replica(tb, i)
	rc := redis.NewClient(r.Options())
	defer rc.Close()
	ctx := context.Background()
	for _, kv := range [][2]string{{"masteruser", ""}, {"masterauth", c.password}} {
		if err := rc.ConfigSet(ctx, kv[0], kv[1]).Err(); err != nil {
			tb.Fatalf("redistest: replica %s: CONFIG SET %s: %v", r.Addr, kv[0], err)
		}
	}
	if err := await(replicaTimeout, func(ctx context.Context) error { return linkUp(ctx, rc) }); err != nil {
		tb.Fatalf("redistest: restoring the replication of %s: %v%s", c.Servers[i].Addr, err, logTails(r))
	}
}

// TakeOver makes the replica of master i take over at once, without the master's
// agreement nor the other masters' votes (CLUSTER FAILOVER TAKEOVER): what an operator
// does when the master cannot be reached, or its replication link is cut
// (CutReplication), which a manual failover would wait for. It returns once it has: see
// AwaitFailover.
func (c *Cluster) TakeOver(tb testing.TB, i int) {
	tb.Helper()
	r := c.replica(tb, i)
	cl := redis.NewClient(r.Options())
	defer cl.Close()
	if err := cl.Do(context.Background(), "CLUSTER", "FAILOVER", "TAKEOVER").Err(); err != nil {
		tb.Fatalf("redistest: CLUSTER FAILOVER TAKEOVER on %s: %v", r.Addr, err)
	}
	c.AwaitFailover(tb, i)
}
