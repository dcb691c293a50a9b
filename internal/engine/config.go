package engine

import (
	"fmt"
	"log/slog"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/observe"
)

// ClientConfig is a Client's configuration; the public package's Options set it.
type ClientConfig struct {
	Prefix      string
	Logger      *slog.Logger
	DriftFactor float64
	Observers   []observe.Observer // told of every event, in this order (observer.go)
	Acks        batch.Acks         // replica acknowledgements asked of every write (acks.go); zero: none
	Err         error              // the first invalid option
}

// DefaultPrefix is the key namespace when no prefix is given: the library's WithPrefix and
// the CLI's --prefix.
const DefaultPrefix = "dlock:"

// DefaultClientConfig is the configuration before any option.
func DefaultClientConfig() ClientConfig {
	return ClientConfig{Prefix: DefaultPrefix, Logger: slog.New(slog.DiscardHandler), DriftFactor: 0.01}
}

// LockConfig is one lock's configuration; the public package's LockOptions set it.
type LockConfig struct {
	TTL   time.Duration
	Renew bool
}

// DefaultTTL is the lease length used when no TTL option is given.
const DefaultTTL = 30 * time.Second

// MinTTL is the shortest lease dlock accepts.
const MinTTL = 10 * time.Millisecond

// RenewalInterval is when a renewing lease is renewed: a third of the way into its TTL,
// counted from the send of the request that set it.
func RenewalInterval(ttl time.Duration) time.Duration { return ttl / 3 }

// UnlockTimeout bounds the Unlock sent after the work under a lock is done (Mutex.Do, the
// CLI's run), when the caller's context may already have ended.
const UnlockTimeout = 5 * time.Second

// DefaultLockConfig is the configuration before any option.
func DefaultLockConfig() LockConfig { return LockConfig{TTL: DefaultTTL, Renew: true} }

// CheckTTL says what is wrong with a lease length, if anything.
func CheckTTL(d time.Duration) error {
	if d < MinTTL {
		return fmt.Errorf("dlock: TTL %v is too short: a lease must last at least %v (the default is %v)", d, MinTTL, DefaultTTL)
	}
	return nil
}
