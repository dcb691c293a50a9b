package redistest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestSentinel: a failover client finds the master through the Sentinels, with the
// passwords of both, and its writes reach the replica; every process is gone after the
// test's cleanup.
func TestSentinel(t *testing.T) {
	t.Parallel()
	var pids []int
	t.Run("inner", func(t *testing.T) {
		d := StartSentinel(t, WithPassword("data-pw"), WithSentinelPassword("sentinel-pw"))
		if len(d.Sentinels) != 3 || len(d.Addrs()) != 3 {
			t.Fatalf("%d Sentinels, %d addresses; want 3", len(d.Sentinels), len(d.Addrs()))
		}
		c := d.Client(t)
		if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatalf("SET through the failover client: %v", err)
		}
		if n, err := c.Wait(ctx, 1, 5*time.Second).Result(); err != nil || n != 1 {
			t.Fatalf("WAIT 1 = %d, %v; want the replica's acknowledgement", n, err)
		}
		if v, err := d.Replica.Client(t).Get(ctx, "k").Result(); err != nil || v != "v" {
			t.Fatalf("GET on the replica = %q, %v", v, err)
		}
		for _, s := range append([]*Server{d.Master, d.Replica}, d.Sentinels...) {
			pids = append(pids, s.PID())
			// What the sweep of a later test process checks before it kills a leftover.
			if st := recordedServerState(pidRecord{owner: os.Getpid(), redis: s.PID(), dir: s.dir}); st != serverIsRecorded {
				t.Errorf("%s (pid %d) would not be swept as a leftover: state %d", s.Addr, s.PID(), st)
			}
		}
	})
	for _, pid := range pids {
		gone(t, pid)
	}
}

// TestSentinelWrongPassword: the Sentinels refuse a client without their password.
func TestSentinelWrongPassword(t *testing.T) {
	t.Parallel()
	d := StartSentinel(t, WithSentinelPassword("sentinel-pw"))
	opts := d.FailoverOptions()
	opts.SentinelPassword = "wrong"
	c := redis.NewFailoverClient(opts)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err == nil || !strings.Contains(err.Error(), "WRONGPASS") {
		t.Fatalf("PING with the wrong Sentinel password: %v, want WRONGPASS", err)
	}
}

func TestMissingSentinelMessage(t *testing.T) {
	t.Setenv("REDIS_SENTINEL", filepath.Join(t.TempDir(), "no-such-redis-sentinel"))
	_, err := findBinary("REDIS_SENTINEL", "redis-sentinel", sentinelHelp)
	for _, want := range []string{"apt-get install -y redis-sentinel", "brew install redis", "REDIS_SENTINEL="} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("missing redis-sentinel: %v, want a message with %q", err, want)
		}
	}
}

// TestSentinelTLS: with WithTLS every process of the deployment speaks TLS only, and a
// failover client that trusts the CA finds the master.
func TestSentinelTLS(t *testing.T) {
	t.Parallel()
	ca := NewCA(t)
	d := StartSentinel(t, WithTLS(ca, ca.Server, "yes"), WithPassword("data-pw"))
	if err := d.Client(t).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("SET through the failover client over TLS: %v", err)
	}
}
