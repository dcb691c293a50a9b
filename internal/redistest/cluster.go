package redistest

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	clusterSlots   = 16384
	clusterTimeout = 20 * time.Second // until a new cluster must be formed
)

// Cluster is a Redis Cluster of masters (no replicas) on loopback ports,
// formed by this package itself (no redis-cli). Its servers are killed by
// the Cleanup of the test that started it.
type Cluster struct {
	// Servers are the masters; Servers[i] serves slots
	// [i*16384/n, (i+1)*16384/n). Kill, Restart, Pause and Resume work on
	// them as on standalone servers (a restarted node keeps its nodes.conf,
	// so it rejoins with its slots, empty).
	Servers []*Server
	// Addrs are the servers' addresses, in the same order.
	Addrs []string

	password string
}

// StartCluster starts `masters` cluster-enabled servers concurrently
// (--cluster-enabled yes, --cluster-node-timeout 5000, plus opts), assigns
// the 16384 slots evenly with CLUSTER ADDSLOTSRANGE, joins the nodes with
// CLUSTER MEET, and returns once every node reports cluster_state:ok, knows
// all nodes, and its CLUSTER SLOTS covers all slots with `masters` distinct
// masters. It fails the test if that does not happen within 20 s.
func StartCluster(tb testing.TB, masters int, opts ...Option) *Cluster {
	tb.Helper()
	cfg := newConfig(opts)
	c := &Cluster{
		Servers:  startMany(tb, masters, cfg, true),
		password: cfg.password,
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
	n := len(c.Servers)
	clients := make([]*redis.Client, n)
	for i, s := range c.Servers {
		clients[i] = redis.NewClient(s.Options())
		defer clients[i].Close()
	}
	for i, cl := range clients {
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
	for i := 1; i < n; i++ {
		if err := clients[i].ClusterMeet(ctx, "127.0.0.1", strconv.Itoa(c.Servers[0].Port)).Err(); err != nil {
			return fmt.Errorf("%s: CLUSTER MEET: %w", c.Addrs[i], err)
		}
	}
	for {
		err := c.converged(ctx, clients)
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			var tails strings.Builder
			for _, s := range c.Servers {
				tails.WriteString(s.logTail())
			}
			return fmt.Errorf("not converged within %v: %v%s", clusterTimeout, err, tails.String())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// converged returns nil if every node sees the complete cluster, else why not.
func (c *Cluster) converged(ctx context.Context, clients []*redis.Client) error {
	n := len(clients)
	want := make(map[string]bool, n)
	for _, a := range c.Addrs {
		want[a] = true
	}
	for i, cl := range clients {
		info, err := cl.ClusterInfo(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER INFO: %w", c.Addrs[i], err)
		}
		if st := infoField(info, "cluster_state"); st != "ok" {
			return fmt.Errorf("%s: cluster_state:%s", c.Addrs[i], st)
		}
		if k := infoField(info, "cluster_known_nodes"); k != strconv.Itoa(n) {
			return fmt.Errorf("%s: cluster_known_nodes:%s, want %d", c.Addrs[i], k, n)
		}
		//lint:ignore SA1019 CLUSTER SLOTS is what go-redis's cluster client reads the topology from
		slots, err := cl.ClusterSlots(ctx).Result()
		if err != nil {
			return fmt.Errorf("%s: CLUSTER SLOTS: %w", c.Addrs[i], err)
		}
		covered, masters := 0, map[string]bool{}
		for _, r := range slots {
			if len(r.Nodes) == 0 {
				return fmt.Errorf("%s: CLUSTER SLOTS %d-%d without a node", c.Addrs[i], r.Start, r.End)
			}
			if !want[r.Nodes[0].Addr] {
				return fmt.Errorf("%s: CLUSTER SLOTS %d-%d served by unexpected %q", c.Addrs[i], r.Start, r.End, r.Nodes[0].Addr)
			}
			covered += r.End - r.Start + 1
			masters[r.Nodes[0].ID] = true
		}
		if covered != clusterSlots || len(masters) != n {
			return fmt.Errorf("%s: CLUSTER SLOTS covers %d slots with %d masters, want %d with %d",
				c.Addrs[i], covered, len(masters), clusterSlots, n)
		}
	}
	return nil
}
