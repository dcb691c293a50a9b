// Package exredis gives the examples their Redis server: the --redis flag, a real server
// when one answers, and an embedded one (miniredis, in the process) when asked for or when
// nothing answers at the default address.
package exredis

import (
	"context"
	"flag"
	"fmt"
	"net"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/embedredis"
)

const (
	// DefaultURL is the server used when neither --redis nor $DLOCK_REDIS names one.
	DefaultURL = "redis://127.0.0.1:6379"
	// Embedded, as the --redis value, starts an in-process miniredis.
	Embedded = "embedded"
	// EnvVar names the environment variable that gives the default for --redis.
	EnvVar = "DLOCK_REDIS"
)

// usage is the help text of --redis.
const usage = "Redis server `URL`: redis://[user:password@]host:port[/db], rediss://... (TLS), or " +
	`"embedded" for an in-process miniredis (default: $` + EnvVar + ", else " + DefaultURL +
	", else embedded when nothing answers there)"

// Flag defines --redis on fs. Give its value to Open.
func Flag(fs *flag.FlagSet) *string { return fs.String("redis", "", usage) }

// Server is the Redis server an example runs on.
type Server struct {
	// URL reaches the server from another process. It may carry a password: never print it.
	URL string
	// Desc says which server this is, for the example's output: no credentials.
	Desc string

	opts *redis.Options
	stop func()
}

// Open connects to the server that the --redis value names: a URL, "embedded", or "" for
// $DLOCK_REDIS, else DefaultURL. Only in the last case, when nothing accepts a connection
// at DefaultURL, it starts an embedded server instead and says so in Desc. Close the
// Server when done.
func Open(ctx context.Context, value string) (*Server, error) {
	raw, fallback := value, false
	if raw == "" {
		raw = os.Getenv(EnvVar)
	}
	if raw == "" {
		raw, fallback = DefaultURL, true
	}
	return open(ctx, raw, fallback)
}

// open connects to raw, or to an embedded server if fallback is set and nothing answers at
// raw's address.
func open(ctx context.Context, raw string, fallback bool) (*Server, error) {
	if raw == Embedded {
		return embedded("")
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, fmt.Errorf("bad Redis URL: %s (want redis://[user:password@]host:port[/db], rediss://..., or %q)",
			redact(err.Error(), raw), Embedded)
	}
	if !answers(opts.Network, opts.Addr) {
		if fallback {
			return embedded("nothing answered at " + opts.Addr)
		}
		return nil, fmt.Errorf("nothing answers at %s: start redis-server there, give another --redis URL, "+
			"or use --redis %s for an in-process server", opts.Addr, Embedded)
	}
	s := &Server{URL: raw, Desc: "Redis at " + opts.Addr, opts: opts, stop: func() {}}
	rdb := s.NewClient()
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	info, err := rdb.Info(ctx, "server").Result()
	if err != nil {
		return nil, fmt.Errorf("the Redis server at %s: %s", opts.Addr, redact(err.Error(), raw))
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			s.Desc = fmt.Sprintf("Redis %s at %s", v, opts.Addr)
		}
	}
	return s, nil
}

// NewClient returns a new go-redis client for the server, with a connection pool of its
// own, as a separate service would have. Close it when done.
func (s *Server) NewClient() *redis.Client {
	opts := *s.opts
	return redis.NewClient(&opts)
}

// Close stops the embedded server, if that is what this is.
func (s *Server) Close() { s.stop() }

// embedded starts an in-process miniredis on a loopback port.
func embedded(why string) (*Server, error) {
	mr, err := embedredis.Start()
	if err != nil {
		return nil, err
	}
	desc := "embedded Redis (miniredis) at " + mr.Addr()
	if why != "" {
		desc += ": " + why
	}
	return &Server{
		URL:  "redis://" + mr.Addr(),
		Desc: desc,
		opts: &redis.Options{Addr: mr.Addr()},
		stop: mr.Close,
	}, nil
}

// answers reports whether something accepts connections at addr.
func answers(network, addr string) bool {
	if network == "" {
		network = "tcp"
	}
	c, err := net.DialTimeout(network, addr, time.Second)
	if err != nil {
		return false
	}
	c.Close()
	return true
}

// redact replaces the password of rawURL, if any, in msg.
func redact(msg, rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}
