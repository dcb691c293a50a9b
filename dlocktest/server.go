package dlocktest

import (
	"context"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// flushTimeout bounds Flush's FLUSHALL.
const flushTimeout = 10 * time.Second

// Server starts a redis-server for the test (as Start does) and returns a dlock Client on
// it, made with opts. The Client, its Redis connections and the server are closed and
// stopped when the test ends.
func Server(t testing.TB, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	return Start(t).NewClient(opts...)
}

// RedisServer is a redis-server process that Start started for one test. It listens on a
// free port of 127.0.0.1, keeps nothing on disk, and is killed when the test ends, after
// the clients made by its methods are closed.
//
// Flush, Kill, Restart, Pause and Resume report a failure with t.Fatal, t being the test
// given to Start: like t.Fatal, they must be called from the goroutine running that test.
type RedisServer struct {
	// Addr is the server's address, "127.0.0.1:PORT". It stays the same across Kill and
	// Restart.
	Addr string
	// URL is "redis://" followed by Addr, for programs that take a URL.
	URL string

	t   testing.TB
	srv *redistest.Server
	rdb *redis.Client
}

// Option configures a server started by Start.
type Option func(*config)

type config struct {
	args []string
}

// WithArgs adds redis-server command-line arguments, one argument each, such as
// WithArgs("--notify-keyspace-events", "Kgx"). They come after dlocktest's own (port,
// address, no persistence), so they win where they set the same thing.
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// Start starts a redis-server on a free loopback port and returns once it answers. The
// binary is $REDIS_SERVER, else redis-server on PATH. If there is none, or it does not
// come up, the test fails with a message that says why and how to install Redis; it is
// never skipped.
func Start(t testing.TB, opts ...Option) *RedisServer {
	t.Helper()
	var cfg config
	for _, o := range opts {
		if o != nil {
			o(&cfg)
		}
	}
	srv := redistest.Start(t, redistest.WithArgs(cfg.args...))
	s := &RedisServer{Addr: srv.Addr, URL: "redis://" + srv.Addr, t: t, srv: srv}
	s.rdb = newRedisClient(t, srv.Options())
	return s
}

// Client returns a go-redis client of the server, for looking at or changing what dlock
// keeps there. It is the same client at every call, closed when the test ends.
func (s *RedisServer) Client() *redis.Client { return s.rdb }

// NewClient returns a new dlock Client on the server, made with opts, with a go-redis
// client of its own: as if it ran in another process. Both are closed when the test ends.
func (s *RedisServer) NewClient(opts ...dlock.Option) *dlock.Client {
	return newClient(s.t, newRedisClient(s.t, s.srv.Options()), opts)
}

// newRedisClient returns a go-redis client made with opts that is closed when the test
// ends. A RedisServer's opts have short timeouts (1s), so that a test against a killed or
// paused server fails fast.
func newRedisClient(t testing.TB, opts *redis.Options) *redis.Client {
	rdb := redis.NewClient(opts)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// newClient returns a dlock Client on rdb that is closed when the test ends, before rdb.
func newClient(t testing.TB, rdb *redis.Client, opts []dlock.Option) *dlock.Client {
	c := dlock.New(rdb, opts...)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// Flush deletes every key of the server (FLUSHALL): every lock, queue and fencing counter.
// Holders learn that they lost their leases at their next renewal; fencing tokens start
// again from 1, as after the loss of a server without persistence.
func (s *RedisServer) Flush() {
	s.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), flushTimeout)
	defer cancel()
	if err := s.rdb.FlushAll(ctx).Err(); err != nil {
		s.t.Fatalf("dlocktest: FLUSHALL on %s: %v", s.Addr, err)
	}
}

// Kill kills the server (SIGKILL) and waits until it has exited: its data is gone, and
// clients get connection errors until Restart. Killing a server that is not running does
// nothing.
func (s *RedisServer) Kill() {
	s.t.Helper()
	s.srv.Kill(s.t)
}

// Restart starts the server again, empty, on the same address, killing it first if it
// runs, and returns once it answers. Clients reconnect by themselves.
func (s *RedisServer) Restart() {
	s.t.Helper()
	s.srv.Restart(s.t)
}

// Pause stops the server (SIGSTOP): it keeps its connections but answers nothing, like a
// hung server or one across a network partition. Resume continues it; the test's end
// kills it even while paused. Unix only.
func (s *RedisServer) Pause() {
	s.t.Helper()
	s.srv.Pause(s.t)
}

// Resume continues a paused server. Resuming a server that is not paused does nothing.
func (s *RedisServer) Resume() {
	s.t.Helper()
	s.srv.Resume(s.t)
}
