package redistest

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	// sentinelTimeout bounds the wait for the Sentinels to agree on the
	// deployment after they started.
	sentinelTimeout = 30 * time.Second
	// sentinels is how many Sentinels watch a deployment; sentinelQuorum of
	// them must agree that the master is down.
	sentinels      = 3
	sentinelQuorum = 2
	// downAfter is the Sentinels' down-after-milliseconds: how long a master
	// may not answer before it is thought down. Short, for failover tests,
	// yet long enough that a loaded test machine does not fail over by
	// accident.
	downAfter = 3 * time.Second
)

// sentinelHelp says how to get a redis-sentinel binary.
const sentinelHelp = "install it with `apt-get install -y redis-sentinel` (Debian/Ubuntu, as root) " +
	"or `brew install redis` (macOS), or run `make test`, which installs it; " +
	"set REDIS_SENTINEL=/path/to/redis-sentinel to use a specific binary"

// Sentinel is a replicated deployment watched by Redis Sentinel: a master, a
// replica of it, and three Sentinels (redis-sentinel) that monitor the master
// as MasterName with a quorum of 2. All of them are Servers: Kill, Restart,
// Pause and Resume work on each, and the test's Cleanup kills them all.
type Sentinel struct {
	// MasterName is the name the Sentinels know the master by: "mymaster".
	MasterName string
	// Master and Replica are the data servers when the deployment started;
	// a failover swaps their roles.
	Master, Replica *Server
	// Sentinels are the three Sentinels.
	Sentinels []*Server

	password, sentinelPassword string
}

// WithSentinelPassword makes the Sentinels of StartSentinel require pw
// (requirepass; they use it with each other too). FailoverOptions and Client
// authenticate with it. Other starters ignore it.
func WithSentinelPassword(pw string) Option {
	return func(c *config) { c.sentinelPassword = pw }
}

// StartSentinel starts a master, a replica of it (--replicaof) and three
// Sentinels, each on a free loopback port, and returns once every Sentinel
// names the master for MasterName, knows the replica, which has synced, and
// knows the other Sentinels. The options apply to the master and the
// replica: with WithPassword both require it, and the replica and the
// Sentinels authenticate with it. WithSentinelPassword and WithTLS apply to
// the Sentinels too. It fails the test (never skips) if redis-sentinel is
// missing or the deployment does not form within 30 s.
func StartSentinel(tb testing.TB, opts ...Option) *Sentinel {
	tb.Helper()
	bin, err := findBinary("REDIS_SENTINEL", "redis-sentinel", sentinelHelp)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	cfg := newConfig(opts)
	d := &Sentinel{MasterName: "mymaster", password: cfg.password, sentinelPassword: cfg.sentinelPassword}
	// Either may be the master, after a failover: each starts a replica's first sync at
	// once, not after the 5 s a master waits by default for more replicas to share it.
	opts = append(slices.Clip(opts), WithArgs("--repl-diskless-sync-delay", "0"))
	d.Master = Start(tb, opts...)
	replicaArgs := []string{"--replicaof", "127.0.0.1", strconv.Itoa(d.Master.Port)}
	if cfg.replicaLink != nil {
		host, port, err := net.SplitHostPort(cfg.replicaLink(d.Master.Addr))
		if err != nil {
			tb.Fatalf("redistest: WithReplicaLink: %v", err)
		}
		replicaArgs = []string{"--replicaof", host, port}
	}
	if cfg.password != "" {
		replicaArgs = append(replicaArgs, "--masterauth", cfg.password)
	}
	if cfg.tls != nil {
		replicaArgs = append(replicaArgs, "--tls-replication", "yes")
	}
	d.Replica = Start(tb, append(slices.Clip(opts), WithArgs(replicaArgs...))...)
	if err := d.startSentinels(tb, bin, cfg.tls); err != nil {
		tb.Fatalf("redistest: starting Sentinels: %v", err)
	}
	if err := d.waitFormed(); err != nil {
		tb.Fatalf("redistest: Sentinel deployment: %v", err)
	}
	return d
}

// startSentinels starts the Sentinels concurrently, each with a config file
// of its own in its directory (Sentinel rewrites it with what it learns);
// with TLS, they use it for every connection they make too.
func (d *Sentinel) startSentinels(tb testing.TB, bin string, tls *tlsSetup) error {
	tb.Helper()
	cfg := config{password: d.sentinelPassword, tls: tls}
	if tls != nil {
		cfg.args = []string{"--tls-replication", "yes"}
	}
	for range sentinels {
		s := newServer(tb, cfg, false)
		s.bin, s.conf = bin, filepath.Join(s.dir, "sentinel.conf")
		if err := os.WriteFile(s.conf, []byte(d.sentinelConf()), 0o600); err != nil {
			return err
		}
		d.Sentinels = append(d.Sentinels, s)
	}
	return startAll(d.Sentinels)
}

func (d *Sentinel) sentinelConf() string {
	conf := fmt.Sprintf("sentinel monitor %s 127.0.0.1 %d %d\n", d.MasterName, d.Master.Port, sentinelQuorum) +
		fmt.Sprintf("sentinel down-after-milliseconds %s %d\n", d.MasterName, downAfter.Milliseconds()) +
		fmt.Sprintf("sentinel failover-timeout %s %d\n", d.MasterName, (10*downAfter).Milliseconds())
	if d.password != "" {
		conf += fmt.Sprintf("sentinel auth-pass %s %s\n", d.MasterName, d.password)
	}
	return conf
}

// Addrs returns the Sentinels' addresses.
func (d *Sentinel) Addrs() []string {
	addrs := make([]string, len(d.Sentinels))
	for i, s := range d.Sentinels {
		addrs[i] = s.Addr
	}
	return addrs
}

// FailoverOptions returns new options for a failover client of the
// deployment: MasterName, SentinelAddrs, the passwords, TLSConfig (WithTLS),
// and 1 s dial, read and write timeouts; everything else is the go-redis
// default.
func (d *Sentinel) FailoverOptions() *redis.FailoverOptions {
	return &redis.FailoverOptions{
		MasterName:       d.MasterName,
		SentinelAddrs:    d.Addrs(),
		TLSConfig:        d.Master.Options().TLSConfig,
		SentinelPassword: d.sentinelPassword,
		Password:         d.password,
		DialTimeout:      clientTimeout,
		ReadTimeout:      clientTimeout,
		WriteTimeout:     clientTimeout,
	}
}

// Client returns a new failover client built from FailoverOptions. It is
// closed by tb.Cleanup (before the servers are killed).
func (d *Sentinel) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	return closedAtCleanup(tb, redis.NewFailoverClient(d.FailoverOptions()))
}

// waitFormed waits until the deployment is what StartSentinel promises.
func (d *Sentinel) waitFormed() error {
	replica := redis.NewClient(d.Replica.Options())
	defer replica.Close()
	clients := make([]*redis.SentinelClient, len(d.Sentinels))
	for i, s := range d.Sentinels {
		clients[i] = redis.NewSentinelClient(s.Options())
		defer clients[i].Close()
	}
	err := await(sentinelTimeout, func(ctx context.Context) error { return d.formed(ctx, replica, clients) })
	if err != nil {
		return fmt.Errorf("%w%s", err, logTails(append([]*Server{d.Master, d.Replica}, d.Sentinels...)...))
	}
	return nil
}

// formed returns nil if the replica has synced and every Sentinel sees the
// master, the replica and the other Sentinels; else why not.
func (d *Sentinel) formed(ctx context.Context, replica *redis.Client, clients []*redis.SentinelClient) error {
	info, err := replica.Info(ctx, "replication").Result()
	if err != nil {
		return fmt.Errorf("replica %s: INFO: %w", d.Replica.Addr, err)
	}
	if st := infoField(info, "master_link_status"); st != "up" {
		return fmt.Errorf("replica %s: master_link_status:%s", d.Replica.Addr, st)
	}
	for i, c := range clients {
		addr := d.Sentinels[i].Addr
		m, err := c.GetMasterAddrByName(ctx, d.MasterName).Result()
		if err != nil {
			return fmt.Errorf("Sentinel %s: get-master-addr-by-name: %w", addr, err)
		}
		if got := strings.Join(m, ":"); got != d.Master.Addr {
			return fmt.Errorf("Sentinel %s: master at %s, want %s", addr, got, d.Master.Addr)
		}
		if err := knowsReplica(ctx, c, d.MasterName, d.Replica.Port); err != nil {
			return fmt.Errorf("Sentinel %s: %w", addr, err)
		}
		master, err := c.Master(ctx, d.MasterName).Result()
		if err != nil {
			return fmt.Errorf("Sentinel %s: SENTINEL MASTER: %w", addr, err)
		}
		if n := master["num-other-sentinels"]; n != strconv.Itoa(sentinels-1) {
			return fmt.Errorf("Sentinel %s: knows %s other Sentinels, want %d", addr, n, sentinels-1)
		}
	}
	return nil
}

// knowsReplica returns nil if the Sentinel lists the replica on port as up.
func knowsReplica(ctx context.Context, c *redis.SentinelClient, master string, port int) error {
	replicas, err := c.Replicas(ctx, master).Result()
	if err != nil {
		return fmt.Errorf("SENTINEL REPLICAS: %w", err)
	}
	for _, r := range replicas {
		if r["port"] == strconv.Itoa(port) {
			if flags := r["flags"]; flags != "slave" {
				return fmt.Errorf("replica on port %d has flags %s", port, flags)
			}
			return nil
		}
	}
	return fmt.Errorf("does not know the replica on port %d yet", port)
}
