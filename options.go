package dlock

import (
	"fmt"
	"log/slog"
	"time"

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
