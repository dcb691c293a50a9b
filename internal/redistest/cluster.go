package redistest

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	clusterSlots   = 16384
	clusterTimeout = 20 * time.Second // until a new cluster must be formed
)

// Cluster is a Redis Cluster on loopback ports, formed by this package itself (no
// redis-cli): masters, and with WithReplica one replica of each. Its servers are killed by
// the Cleanup of the test that started it.
type Cluster struct {
	// Servers are the masters; Servers[i] serves slots [i*16384/n, (i+1)*16384/n).
	// Kill, Restart, Pause and Resume work on them as on standalone servers (a restarted
	// node keeps its nodes.conf, so it rejoins with its slots, empty). A failover
	// (Failover, AwaitFailover) swaps Servers[i] and Replicas[i].
	Servers []*Server
	// Replicas[i] replicates Servers[i] (WithReplica); nil without replicas.
	Replicas []*Server
	// Addrs are the masters' addresses, in the order of Servers.
	Addrs []string

	password string
}

// WithReplica gives each master of StartCluster a replica. Other starters ignore it.
func WithReplica() Option {
	return func(c *config) { c.replica = true }
}

// StartCluster starts `masters` cluster-enabled servers concurrently (--cluster-enabled
// yes, --cluster-node-timeout 5000, plus opts), and with WithReplica as many replicas;
// assigns the 16384 slots evenly to the masters with CLUSTER ADDSLOTSRANGE, joins the
// nodes with CLUSTER MEET, makes each replica replicate its master (CLUSTER REPLICATE),
// and returns once every node reports cluster_state:ok, knows all nodes, and its CLUSTER
// SLOTS covers all slots with `masters` distinct masters (each with its replica, whose
// link is up). It fails the test if that does not happen within 20 s.
func StartCluster(tb testing.TB, masters int, opts ...Option) *Cluster {
	tb.Helper()
	cfg := newConfig(opts)
	n := masters
	if cfg.replica {
		n *= 2
	}
	all := startMany(tb, n, cfg, true)
	c := &Cluster{Servers: all[:masters], password: cfg.password}
	if cfg.replica {
		c.Replicas = all[masters:]
	}
	for _, s := range c.Servers {
		c.Addrs = append(c.Addrs, s.Addr)
	}
	if err := c.form(); err != nil {
		tb.Fatalf("redistest: forming a %d-master cluster: %v", masters, err)
	}
	return c
}

// Options returns new cluster client options: Addrs, Password, and 1 s
// dial/read/write timeouts; everything else is the go-redis default.
func (c *Cluster) Options() *redis.ClusterOptions {
	return &redis.ClusterOptions{
		Addrs:        append([]string(nil), c.Addrs...),
		Password:     c.password,
		DialTimeout:  clientTimeout,
		ReadTimeout:  clientTimeout,
		WriteTimeout: clientTimeout,
	}
}

// Client returns a new cluster client built from Options. It is closed by
// tb.Cleanup (before the servers are killed).
func (c *Cluster) Client(tb testing.TB) *redis.ClusterClient {
	tb.Helper()
	return closedAtCleanup(tb, redis.NewClusterClient(c.Options()))
}

func (c *Cluster) form() error {
	ctx, cancel := context.WithTimeout(context.Background(), clusterTimeout)
	defer cancel()
	all := c.nodes()
	clients := make([]*redis.Client, len(all))
	for i, s := range all {
		clients[i] = redis.NewClient(s.Options())
		defer clients[i].Close()
	}
	n := len(c.Servers)
	for i, cl := range clients[:n] {
		lo, hi := i*clusterSlots/n, (i+1)*clusterSlots/n-1
		if err := cl.Do(ctx, "CLUSTER", "ADDSLOTSRANGE", lo, hi).Err(); err != nil {
			return fmt.Errorf("%s: CLUSTER ADDSLOTSRANGE %d %d: %w", c.Addrs[i], lo, hi, err)
		}
		// Distinct epochs up front spare the nodes the epoch collision
		// resolution (what redis-cli --cluster create does too).
		if err := cl.Do(ctx, "CLUSTER", "SET-CONFIG-EPOCH", i+1).Err(); err != nil {
			return fmt.Errorf("%s: CLUSTER SET-CONFIG-EPOCH: %w", c.Addrs[i], err)
		}
	}
	for i := 1; i < len(all); i++ {
		if err := clients[i].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(all[0].Port)).Err(); err != nil {
			return fmt.Errorf("%s: CLUSTER MEET: %w", all[i].Addr, err)
		}
	}
	if err := c.replicate(ctx, clients); err != nil {
		return err
	}
	if err := await(clusterTimeout, func(ctx context.Context) error { return c.converged(ctx, clients) }); err != nil {
		return fmt.Errorf("%w%s", err, logTails(all...))
	}
	return nil
}

// nodes are the masters, then the replicas.
func (c *Cluster) nodes() []*Server { return append(slices.Clip(c.Servers), c.Replicas...) }

// replicate makes each replica replicate its master, once it knows the master (a
// replica must have heard of a node through the cluster bus before it can follow it).
func (c *Cluster) replicate(ctx context.Context, clients []*redis.Client) error {
	n := len(c.Servers)
	for i, r := range c.Replicas {
		id, err := clients[i].ClusterMyID(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER MYID: %w", c.Addrs[i], err)
		}
		err = await(clusterTimeout, func(ctx context.Context) error {
			return clients[n+i].Do(ctx, "CLUSTER", "REPLICATE", id).Err()
		})
		if err != nil {
			return fmt.Errorf("%s: CLUSTER REPLICATE %s (master %s): %w%s", r.Addr, id, c.Addrs[i], err, logTails(r))
		}
	}
	return nil
}

// converged returns nil if every node sees the complete cluster, else why not.
func (c *Cluster) converged(ctx context.Context, clients []*redis.Client) error {
	all := c.nodes()
	for i, cl := range clients {
		info, err := cl.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", all[i].Addr, err)
		}
		if st := infoField(info, "cluster_state"); st != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", all[i].Addr, st)
		}
		if k := infoField(info, "cluster_known_nodes"); k != strconv.Itoa(len(all)) {
			return fmt.Errorf("%s: cluster_known_nodes:%s, want %d", all[i].Addr, k, len(all))
		}
		if err := c.slotsServed(ctx, cl); err != nil {
			return fmt.Errorf("%s: %w", all[i].Addr, err)
		}
	}
	for i, r := range c.Replicas {
		info, err := clients[len(c.Servers)+i].Info(ctx, "replication").Result()
		if err != nil {
			return fmt.Errorf("replica %s: INFO: %w", r.Addr, err)
		}
		if st := infoField(info, "master_link_status"); st != "up" {
			return fmt.Errorf("replica %s: master_link_status:%s", r.Addr, st)
		}
	}
	return nil
}

// slotsServed returns nil if cl's CLUSTER SLOTS covers every slot, each range by one of
// the masters (and its replica, with replicas), every master serving some.
func (c *Cluster) slotsServed(ctx context.Context, cl *redis.Client) error {
	replicaOf := make(map[string]string, len(c.Servers))
	for i, a := range c.Addrs {
		replicaOf[a] = ""
		if c.Replicas != nil {
			replicaOf[a] = c.Replicas[i].Addr
		}
	}
	//lint:ignore SA1019 CLUSTER SLOTS is what go-redis's cluster client reads the topology from
	slots, err := cl.ClusterSlots(ctx).Result()
	if err != nil {
		return fmt.Errorf("CLUSTER SLOTS: %w", err)
	}
	covered, masters := 0, map[string]bool{}
	for _, r := range slots {
		if len(r.Nodes) == 0 {
			return fmt.Errorf("CLUSTER SLOTS %d-%d without a node", r.Start, r.End)
		}
		replica, ok := replicaOf[r.Nodes[0].Addr]
		if !ok {
			return fmt.Errorf("CLUSTER SLOTS %d-%d served by unexpected %q", r.Start, r.End, r.Nodes[0].Addr)
		}
		if replica != "" && (len(r.Nodes) != 2 || r.Nodes[1].Addr != replica) {
			return fmt.Errorf("CLUSTER SLOTS %d-%d: nodes %v, want the replica %s after its master", r.Start, r.End, r.Nodes, replica)
		}
		covered += r.End - r.Start + 1
		masters[r.Nodes[0].ID] = true
	}
	if covered != clusterSlots || len(masters) != len(c.Servers) {
		return fmt.Errorf("CLUSTER SLOTS covers %d slots with %d masters, want %d with %d",
			covered, len(masters), clusterSlots, len(c.Servers))
	}
	return nil
}
