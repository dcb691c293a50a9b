package redistest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// failoverTimeout bounds a failover: Sentinel's down-after (3 s) and election, or a
// Cluster replica's node timeout (5 s) and election, with room for a loaded machine.
const failoverTimeout = 30 * time.Second

// WithReplicaLink makes the replica of StartSentinel replicate from the address that
// link returns for the master's, instead of from the master itself: a test puts a proxy
// there, to delay or cut replication alone. Other starters ignore it.
func WithReplicaLink(link func(masterAddr string) string) Option {
	return func(c *config) { c.replicaLink = link }
}

// Failover asks the Sentinels to fail over (SENTINEL FAILOVER, which promotes the
// replica even though the master is up) and returns once they have: see AwaitFailover.
func (d *Sentinel) Failover(tb testing.TB) {
	tb.Helper()
	c := redis.NewSentinelClient(d.Sentinels[0].Options())
	defer c.Close()
	if err := c.Failover(context.Background(), d.MasterName).Err(); err != nil {
		tb.Fatalf("redistest: SENTINEL FAILOVER %s: %v", d.MasterName, err)
	}
	d.AwaitFailover(tb)
}

// AwaitFailover waits until the replica has become the master: it says so, and every
// Sentinel that answers names it. Then Master and Replica swap. Call it after killing or
// pausing the master (the Sentinels act after their down-after time, 3 s) or after
// Failover; it fails the test after 30 s.
func (d *Sentinel) AwaitFailover(tb testing.TB) {
	tb.Helper()
	err := await(failoverTimeout, func(ctx context.Context) error { return d.promoted(ctx) })
	if err != nil {
		tb.Fatalf("redistest: Sentinel failover: %v%s", err, logTails(d.Replica, d.Sentinels[0]))
	}
	d.Master, d.Replica = d.Replica, d.Master
}

// promoted returns nil if the replica is the master by its own word and by that of every
// Sentinel that answers (at least a quorum of them).
func (d *Sentinel) promoted(ctx context.Context) error {
	if err := isMaster(ctx, d.Replica); err != nil {
		return err
	}
	agreed := 0
	for _, s := range d.Sentinels {
		c := redis.NewSentinelClient(s.Options())
		m, err := c.GetMasterAddrByName(ctx, d.MasterName).Result()
		c.Close()
		if err != nil {
			continue // a Sentinel the test killed or paused
		}
		if got := strings.Join(m, ":"); got != d.Replica.Addr {
			return fmt.Errorf("Sentinel %s names %s, want %s", s.Addr, got, d.Replica.Addr)
		}
		agreed++
	}
	if agreed < sentinelQuorum {
		return fmt.Errorf("%d Sentinels answered, want %d", agreed, sentinelQuorum)
	}
	return nil
}

// isMaster returns nil if s says it is a master (INFO replication, role:master).
func isMaster(ctx context.Context, s *Server) error {
	c := redis.NewClient(s.Options())
	defer c.Close()
	info, err := c.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("%s: INFO: %w", s.Addr, err)
	}
	if role := infoField(info, "role"); role != "master" {
		return fmt.Errorf("%s: role:%s", s.Addr, role)
	}
	return nil
}

// await calls check every 50 ms until it returns nil, or returns its last error after
// timeout.
func await(timeout time.Duration, check func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		err := check(ctx)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not within %v: %w", timeout, err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// Failover makes the replica of master i take over (CLUSTER FAILOVER on the replica, a
// manual failover that the master, which must be up, agrees to), and returns once it has:
// see AwaitFailover.
func (c *Cluster) Failover(tb testing.TB, i int) {
	tb.Helper()
	r := c.replica(tb, i)
	cl := redis.NewClient(r.Options())
	defer cl.Close()
	if err := cl.ClusterFailover(context.Background()).Err(); err != nil {
		tb.Fatalf("redistest: CLUSTER FAILOVER on %s: %v", r.Addr, err)
	}
	c.AwaitFailover(tb, i)
}

// AwaitFailover waits until the replica of master i serves its slots: it says it is a
// master, and every node that answers maps the slots to it. Then Servers[i] and
// Replicas[i] swap, and Addrs[i] follows. Call it after killing or pausing master i (the
// replica takes over after the node timeout, 5 s) or after Failover; it fails the test
// after 30 s.
func (c *Cluster) AwaitFailover(tb testing.TB, i int) {
	tb.Helper()
	r := c.replica(tb, i)
	err := await(failoverTimeout, func(ctx context.Context) error { return c.servedBy(ctx, i, r) })
	if err != nil {
		tb.Fatalf("redistest: Cluster failover of %s to %s: %v%s", c.Servers[i].Addr, r.Addr, err, logTails(r))
	}
	c.Servers[i], c.Replicas[i] = r, c.Servers[i]
	c.Addrs[i] = r.Addr
}

func (c *Cluster) replica(tb testing.TB, i int) *Server {
	tb.Helper()
	if i < 0 || i >= len(c.Replicas) {
		tb.Fatalf("redistest: master %d has no replica: start the cluster WithReplica", i)
	}
	return c.Replicas[i]
}

// servedBy returns nil if r is a master and every node that answers maps master i's
// first slot to r.
func (c *Cluster) servedBy(ctx context.Context, i int, r *Server) error {
	if err := isMaster(ctx, r); err != nil {
		return err
	}
	slot := int64(i * clusterSlots / len(c.Servers))
	for _, s := range c.nodes() {
		cl := redis.NewClient(s.Options())
		//lint:ignore SA1019 CLUSTER SLOTS is what go-redis's cluster client reads the topology from
		slots, err := cl.ClusterSlots(ctx).Result()
		cl.Close()
		if err != nil {
			continue // the old master, killed or paused by the test
		}
		for _, rng := range slots {
			if int64(rng.Start) <= slot && slot <= int64(rng.End) && rng.Nodes[0].Addr != r.Addr {
				return fmt.Errorf("%s maps slot %d to %s", s.Addr, slot, rng.Nodes[0].Addr)
			}
		}
	}
	return nil
}
