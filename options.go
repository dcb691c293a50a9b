package dlock

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/engine"
)

// Option configures a Client. The zero configuration is the recommended one.
type Option func(*clientConfig)

// clientConfig is what the options set: the engine's configuration itself.
type clientConfig = engine.ClientConfig

// newClientConfig applies opts to the defaults; cfg.Err holds the first invalid one.
func newClientConfig(opts []Option) clientConfig {
	cfg := engine.DefaultClientConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return cfg
}

// WithPrefix sets the namespace of every key the Client writes; the default is "dlock:".
// With "" a Mutex's lock key is the bare name, so that it excludes, and is excluded by,
// Redlock clients in other languages that use the same key.
func WithPrefix(prefix string) Option {
	return func(c *clientConfig) { c.Prefix = prefix }
}

// WithLogger sets where the Client reports what it cannot return as an error: lost
// leases, failed renewals, failed releases during Close. The default discards them.
func WithLogger(l *slog.Logger) Option {
	return func(c *clientConfig) {
		if l != nil {
			c.Logger = l
		}
	}
}

// WithOwner names the Client's holders: Inspect reports the name with each lease it
// finds (Holder.Owner), the dlock command shows it in status, list and top, and every
// observer event carries it, so that on call one can tell which host holds a lock. The
// default is the host name and the process id, "host:pid". The name is stored in Redis,
// readable by anyone who can read the locks: put nothing secret in it. It is at most
// MaxOwnerLen bytes of printable UTF-8; WithOwner("") names none and writes nothing.
//
// The name costs no round trip: each Client writes it in one key of its own per node, sent
// with its acquisitions and renewals at most every 30 seconds per node, deleted by Close
// (and expiring by itself if the process dies), and its holders' tokens begin with the
// Client's id that finds it. A
// TimestampMutex holder, whose key holds a deadline and no token, has no owner.
func WithOwner(owner string) Option {
	return func(c *clientConfig) {
		if err := engine.CheckOwner(owner); err != nil {
			c.Err = err
			return
		}
		c.Owner = owner
	}
}

// MaxOwnerLen is the longest owner name WithOwner accepts: 128 bytes.
const MaxOwnerLen = engine.MaxOwnerLen

// WithDriftFactor sets the clock-drift allowance: a lease of length TTL is taken to be
// exclusive for TTL - (TTL*f + 2ms) after its request was sent. The default is 0.01.
func WithDriftFactor(f float64) Option {
	return func(c *clientConfig) {
		if !(f >= 0 && f < 0.5) { // also rejects NaN
			c.Err = fmt.Errorf("dlock: drift factor %v is out of range: use a value in [0, 0.5), such as the default 0.01", f)
			return
		}
		c.DriftFactor = f
	}
}

// MaxReplicaAckTimeout is the longest wait WithReplicaAcks accepts: 10 seconds.
const MaxReplicaAckTimeout = 10 * time.Second

// WithReplicaAcks makes every write of the Client wait until replicas replicas of the
// master have acknowledged it, for at most timeout: each round trip of acquisitions,
// renewals, Extends and Unlocks is followed by WAIT replicas timeout, in the same
// pipeline to the key's master. The cost is paid once per round trip, not once per lock:
// the renewals of one tick wait once.
//
// An acquisition whose write fewer replicas acknowledged is undone and fails with an
// error that wraps ErrNotReplicated (Lock retries a few times first, as after any failed
// attempt; TryLock returns it at once). A renewal that is not acknowledged counts as
// failed and is retried until the lease's deadline; an Extend that is not returns the
// error and leaves the lease as it was; an Unlock that is not returns it, and the lease
// has ended all the same.
//
// Acknowledgements narrow the window in which a failover loses a lock: a lock that was
// acknowledged is on the replicas when one of them is promoted. They do not close it:
// WAIT is not consensus, and a replica that did not acknowledge can still be promoted
// (see docs/replicas.md in the repository); fencing tokens are what protect the data.
//
// replicas must be at least 1 and timeout between 1ms and MaxReplicaAckTimeout, and leave
// headroom in the Redis client's ReadTimeout, which bounds the pipeline's replies: timeout
// plus a fifth of ReadTimeout (at least 100ms) must not exceed it, so 4s at most with
// go-redis's default of 5s. A read that times out anyway (a server that stalls) makes
// go-redis send the whole pipeline again, up to its MaxRetries (3 by default) times, each
// with its WAIT: set MaxRetries to -1 on the Redis client if a call must not wait more than
// one ReadTimeout. A call waits for its node up to twice timeout on top of the usual
// per-node timeout, since it can queue behind a WAIT under way; a renewal waits at most a
// third of the lease's TTL, so with a TTL under six times timeout a renewal whose WAITs run
// out gives up before they answer and is retried until the deadline, and a replica that
// lags costs the lease. The
// Redis client must be a *redis.Client (a server, or a Sentinel failover client) or a
// *redis.ClusterClient: on a Cluster each master's calls go through the node client of
// that master, whose hooks (ClusterClient.OnNewNode) see them, not the cluster client's.
// Inspect and ForceUnlock, operators' tools, do not wait. Without this option nothing is
// waited for and nothing is added to a round trip.
func WithReplicaAcks(replicas int, timeout time.Duration) Option {
	return func(c *clientConfig) {
		switch {
		case replicas < 1:
			c.Err = fmt.Errorf("dlock: WithReplicaAcks(%d, %v): replicas must be at least 1: the number of replicas that must acknowledge each write", replicas, timeout)
		case checkAckTimeout("WithReplicaAcks", timeout) != nil:
			c.Err = checkAckTimeout("WithReplicaAcks", timeout)
		default:
			c.Acks = batch.Acks{Replicas: replicas, Timeout: timeout}
		}
	}
}

// WithAOFAcks is WithReplicaAcks with WAITAOF (Redis 7.2 and later) instead of WAIT:
// every round trip ends with WAITAOF local replicas timeout, so a write counts only once
// the master's own append-only file has fsynced it (local 1) and replicas replicas' have.
// local is 0 or 1, replicas at least 0, and at least one of them must be asked for; the
// timeout and everything else are as for WithReplicaAcks, whose option this one replaces
// (the last given wins). A server without WAITAOF (before 7.2) refuses every write: each
// acquisition is undone and fails with an error wrapping ErrNotReplicated that says so.
// That refusal is what dlock's tests check; they have no server with WAITAOF.
func WithAOFAcks(local, replicas int, timeout time.Duration) Option {
	return func(c *clientConfig) {
		switch {
		case local < 0 || local > 1 || replicas < 0 || local+replicas == 0:
			c.Err = fmt.Errorf("dlock: WithAOFAcks(%d, %d, %v): local must be 0 or 1 (the master's own fsync) and replicas at least 0, and one of them must be asked for", local, replicas, timeout)
		default:
			if err := checkAckTimeout("WithAOFAcks", timeout); err != nil {
				c.Err = err
				return
			}
			c.Acks = batch.Acks{Replicas: replicas, Timeout: timeout, AOF: true, Local: local}
		}
	}
}

// checkAckTimeout says what is wrong with the timeout of an acknowledgement option.
func checkAckTimeout(option string, timeout time.Duration) error {
	if timeout < time.Millisecond || timeout > MaxReplicaAckTimeout {
		return fmt.Errorf("dlock: %s timeout %v: it must be between 1ms and %v: WAIT blocks the Client's calls behind it for that long when a replica is down (WAIT with 0 would block forever)", option, timeout, MaxReplicaAckTimeout)
	}
	return nil
}

// LockOption configures one lock.
type LockOption func(*lockConfig)

// lockConfig is what the lock options set: the engine's configuration itself.
type lockConfig = engine.LockConfig

// DefaultTTL is the lease length used when no TTL option is given: 30 seconds.
const DefaultTTL = engine.DefaultTTL

// MinTTL is the shortest lease dlock accepts: 10 milliseconds.
const MinTTL = engine.MinTTL

// TTL sets the lease length; the default is 30s. A renewed lease is extended by TTL every
// TTL/3, so TTL is also how long a crashed holder keeps others waiting.
func TTL(d time.Duration) LockOption {
	return func(c *lockConfig) { c.TTL = d }
}

// NoRenew turns renewal off: the lease ends at its deadline unless Extend is called.
func NoRenew() LockOption {
	return func(c *lockConfig) { c.Renew = false }
}

// newLockConfig applies opts to the defaults and says what is wrong with the result.
func newLockConfig(opts []LockOption) (lockConfig, error) {
	cfg := engine.DefaultLockConfig()
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	return cfg, engine.CheckTTL(cfg.TTL)
}
