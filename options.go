package dlock

import (
	"fmt"
	"log/slog"
	"time"
)

// Option configures a Client. The zero configuration is the recommended one.
type Option func(*clientConfig)

type clientConfig struct {
	prefix      string
	logger      *slog.Logger
	driftFactor float64
	err         error // the first invalid option
}

// newClientConfig applies opts to the defaults; cfg.err holds the first invalid one.
func newClientConfig(opts []Option) clientConfig {
	cfg := clientConfig{prefix: "dlock:", logger: slog.New(slog.DiscardHandler), driftFactor: 0.01}
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
	return func(c *clientConfig) { c.prefix = prefix }
}

// WithLogger sets where the Client reports what it cannot return as an error: lost
// leases, failed renewals, failed releases during Close. The default discards them.
func WithLogger(l *slog.Logger) Option {
	return func(c *clientConfig) {
		if l != nil {
			c.logger = l
		}
	}
}

// WithDriftFactor sets the clock-drift allowance: a lease of length TTL is taken to be
// exclusive for TTL - (TTL*f + 2ms) after its request was sent. The default is 0.01.
func WithDriftFactor(f float64) Option {
	return func(c *clientConfig) {
		if !(f >= 0 && f < 0.5) { // also rejects NaN
			c.err = fmt.Errorf("dlock: drift factor %v is out of range: use a value in [0, 0.5), such as the default 0.01", f)
			return
		}
		c.driftFactor = f
	}
}

// LockOption configures one lock.
type LockOption func(*lockConfig)

type lockConfig struct {
	ttl   time.Duration
	renew bool
}

// DefaultTTL is the lease length used when no TTL option is given.
const DefaultTTL = 30 * time.Second

// MinTTL is the shortest lease dlock accepts.
const MinTTL = 10 * time.Millisecond

// TTL sets the lease length; the default is 30s. A renewed lease is extended by TTL every
// TTL/3, so TTL is also how long a crashed holder keeps others waiting.
func TTL(d time.Duration) LockOption {
	return func(c *lockConfig) { c.ttl = d }
}

// NoRenew turns renewal off: the lease ends at its deadline unless Extend is called.
func NoRenew() LockOption {
	return func(c *lockConfig) { c.renew = false }
}

func newLockConfig(opts []LockOption) (lockConfig, error) {
	cfg := lockConfig{ttl: DefaultTTL, renew: true}
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	if err := checkTTL(cfg.ttl); err != nil {
		return cfg, err
	}
	return cfg, nil
}

func checkTTL(d time.Duration) error {
	if d < MinTTL {
		return fmt.Errorf("dlock: TTL %v is too short: a lease must last at least %v (the default is %v)", d, MinTTL, DefaultTTL)
	}
	return nil
}
