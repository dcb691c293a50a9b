package engine

import (
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

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
	Owner       string             // the name of the Client's holders (owner.go); "": none
	Err         error              // the first invalid option
}

// DefaultPrefix is the key namespace when no prefix is given: the library's WithPrefix and
// the CLI's --prefix.
const DefaultPrefix = "dlock:"

// DefaultClientConfig is the configuration before any option.
func DefaultClientConfig() ClientConfig {
	return ClientConfig{Prefix: DefaultPrefix, Logger: slog.New(slog.DiscardHandler), DriftFactor: 0.01, Owner: DefaultOwner()}
}

// MaxOwnerLen is the longest owner name WithOwner accepts, in bytes.
const MaxOwnerLen = 128

// DefaultOwner is the owner name of a Client that was given none: the host name and the
// process id, "host:pid", which say where to look for the holder.
func DefaultOwner() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "unknown-host"
	}
	if len(host) > MaxOwnerLen-12 {
		host = host[:MaxOwnerLen-12]
	}
	return host + ":" + strconv.Itoa(os.Getpid())
}

// CheckOwner says what is wrong with an owner name, if anything. It is shown by the CLI in
// a terminal and stored in Redis, so it is bounded and printable.
func CheckOwner(owner string) error {
	switch {
	case len(owner) > MaxOwnerLen:
		return fmt.Errorf("dlock: WithOwner: the owner name is %d bytes long: at most %d are kept, so shorten it (host and process, or a service's instance name)", len(owner), MaxOwnerLen)
	case !utf8.ValidString(owner):
		return fmt.Errorf("dlock: WithOwner(%q): the owner name is not valid UTF-8: give it as text", owner)
	case strings.IndexFunc(owner, unicode.IsControl) >= 0:
		return fmt.Errorf("dlock: WithOwner(%q): the owner name has a control character: it is shown on one line in a terminal, so use printable characters only", owner)
	}
	return nil
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
