package redistest

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	readyTimeout  = 10 * time.Second // until a started server must answer PING
	startAttempts = 5                // tries when the port was taken meanwhile
)

// errExitedEarly marks a server that exited before it answered PING, which
// is almost always a port taken between picking and binding; it is retried.
var errExitedEarly = errors.New("redis-server exited before it answered PING")

// Server is one redis-server process listening on 127.0.0.1:Port, without
// persistence (no RDB, no AOF). It is killed (SIGKILL, then waited for, pid
// file removed) by the Cleanup of the test that started it; its directory
// is a t.TempDir and is removed after that. The methods are safe for
// concurrent use.
type Server struct {
	// Addr is "127.0.0.1:Port". It stays the same across Kill and Restart.
	Addr string
	// Port is the client port.
	Port int

	bin      string
	dir      string
	password string
	userArgs []string
	cluster  bool
	conf     string    // a config file, given before the arguments (a Sentinel's); or ""
	tls      *tlsSetup // TLS only, Port being the --tls-port (WithTLS); or nil

	mu     sync.Mutex
	proc   *process // nil while not running
	closed bool     // the test's cleanup ran
	port   int      // reserved port to release at cleanup, 0 if none
}

// Start starts a standalone redis-server on a free loopback port and returns
// once it answers PING. It fails the test (never skips) if redis-server is
// missing or does not come up; the message includes the tail of its log.
// The server is killed by tb.Cleanup.
func Start(tb testing.TB, opts ...Option) *Server {
	tb.Helper()
	s := newServer(tb, newConfig(opts), false)
	if err := s.startFresh(); err != nil {
		tb.Fatalf("%v", err)
	}
	return s
}

// StartNodes starts n independent standalone servers concurrently (as Start
// does, with the same options each) and returns once all answer PING. All
// are killed by tb.Cleanup.
func StartNodes(tb testing.TB, n int, opts ...Option) []*Server {
	tb.Helper()
	return startMany(tb, n, newConfig(opts), false)
}

func startMany(tb testing.TB, n int, cfg config, cluster bool) []*Server {
	tb.Helper()
	if n < 1 {
		tb.Fatalf("redistest: need at least 1 server, got %d", n)
	}
	servers := make([]*Server, n)
	for i := range servers {
		servers[i] = newServer(tb, cfg, cluster)
	}
	if err := startAll(servers); err != nil {
		tb.Fatalf("%v", err)
	}
	return servers
}

// startAll starts prepared servers concurrently, each on a fresh port.
func startAll(servers []*Server) error {
	errs := make([]error, len(servers))
	var wg sync.WaitGroup
	for i, s := range servers {
		wg.Go(func() { errs[i] = s.startFresh() })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// newServer prepares a server (binary, directory, cleanup) without starting
// it. Must run on the test goroutine.
func newServer(tb testing.TB, cfg config, cluster bool) *Server {
	tb.Helper()
	bin, err := redisBinary()
	if err != nil {
		tb.Fatalf("%v", err)
	}
	sweepLeftoversOnce()
	s := &Server{
		bin:      bin,
		dir:      tb.TempDir(), // removed after the kill below: cleanups run last-in first-out
		password: cfg.password,
		userArgs: append([]string(nil), cfg.args...),
		cluster:  cluster,
		tls:      cfg.tls,
	}
	tb.Cleanup(s.cleanup)
	return s
}

// startFresh picks a free port and starts the server on it, trying other
// ports if the process exits early (port taken in the meantime).
func (s *Server) startFresh() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	var err error
	for range startAttempts {
		var port int
		port, err = reservePort(s.cluster)
		if err != nil {
			return err
		}
		s.port, s.Port, s.Addr = port, port, "127.0.0.1:"+strconv.Itoa(port)
		os.Remove(filepath.Join(s.dir, "nodes.conf")) // cluster identity from a failed attempt
		if err = s.spawn(); err == nil {
			return nil
		}
		releasePort(port, s.cluster)
		s.port = 0
		if !errors.Is(err, errExitedEarly) {
			break
		}
	}
	return err
}

func (s *Server) logPath() string { return filepath.Join(s.dir, "redis.log") }

func (s *Server) argv() []string {
	var a []string
	if s.conf != "" {
		a = append(a, s.conf) // redis-server takes a config file only as its first argument
	}
	if s.tls != nil {
		a = append(a, "--port", "0", "--tls-port", strconv.Itoa(s.Port))
		a = append(a, s.tls.args...)
	} else {
		a = append(a, "--port", strconv.Itoa(s.Port))
	}
	a = append(a,
		"--bind", "127.0.0.1",
		"--save", "",
		"--appendonly", "no",
		"--protected-mode", "no",
		"--dir", s.dir,
		"--logfile", s.logPath(),
		"--daemonize", "no",
	)
	if s.password != "" {
		a = append(a, "--requirepass", s.password)
	}
	if s.cluster {
		a = append(a,
			"--cluster-enabled", "yes",
			"--cluster-config-file", filepath.Join(s.dir, "nodes.conf"),
			"--cluster-node-timeout", "5000",
			"--cluster-announce-ip", "127.0.0.1",
			// A replica's first sync starts at once, not after the 5 s that a master waits
			// by default for more replicas to share a diskless transfer.
			"--repl-diskless-sync-delay", "0",
		)
	}
	return append(a, s.userArgs...)
}

// Options returns new client options for this server: Addr, Password,
// TLSConfig (WithTLS), DialTimeout, ReadTimeout and WriteTimeout of 1 s;
// everything else (including MaxRetries) is the go-redis default. The caller
// may modify them.
func (s *Server) Options() *redis.Options {
	return &redis.Options{
		Addr:         s.Addr,
		Password:     s.password,
		TLSConfig:    s.tls.clientConfig(),
		DialTimeout:  clientTimeout,
		ReadTimeout:  clientTimeout,
		WriteTimeout: clientTimeout,
	}
}

// clientTimeout is the dial, read and write timeout of every client the harness
// builds: short, so that a test against a hung server fails fast.
const clientTimeout = time.Second

// Client returns a new client built from Options. It is closed by
// tb.Cleanup (before the server is killed).
func (s *Server) Client(tb testing.TB) *redis.Client {
	tb.Helper()
	return closedAtCleanup(tb, redis.NewClient(s.Options()))
}

// closedAtCleanup closes c when the test ends; cleanups run last-in first-out,
// so a client made after its servers is closed before they are killed.
func closedAtCleanup[C interface{ Close() error }](tb testing.TB, c C) C {
	tb.Cleanup(func() { _ = c.Close() })
	return c
}

// Kill sends SIGKILL to the server (paused or not) and waits for it to exit.
// Killing a server that is not running does nothing. Its data is lost;
// Restart starts it again.
func (s *Server) Kill(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
}

func (s *Server) killLocked() {
	if s.proc != nil {
		s.proc.kill()
		s.proc = nil
	}
}

// Restart starts the server again on the same port with the same arguments
// and an empty dataset (a cluster node keeps its cluster configuration,
// nodes.conf), killing it first if it is running. It returns once the server
// answers PING, and fails the test if it does not (e.g. because another
// process took the port while the server was down; that is retried for a
// while first).
func (s *Server) Restart(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		tb.Fatalf("redistest: Restart of %s after its test's cleanup", s.Addr)
	}
	s.killLocked()
	var err error
	for attempt := range startAttempts {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 200 * time.Millisecond)
		}
		if err = s.spawn(); err == nil || !errors.Is(err, errExitedEarly) {
			break
		}
	}
	if err != nil {
		tb.Fatalf("redistest: restart: %v", err)
	}
}

// Pause sends SIGSTOP to the server: it keeps its port and connections but
// answers nothing, like a hung server. On Linux, Pause returns once the
// process is stopped. Resume continues it; Kill and the test's cleanup kill
// it even while paused. Pause fails the test if the server is not running.
func (s *Server) Pause(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		tb.Fatalf("redistest: Pause: %s is not running", s.Addr)
	}
	pid := s.proc.cmd.Process.Pid
	if err := stopProcess(pid); err != nil {
		tb.Fatalf("redistest: Pause %s: %v", s.Addr, err)
	}
	waitStopped(pid)
}

// Resume sends SIGCONT to a paused server. Resuming a server that is not
// paused, or not running (killed meanwhile), does nothing, so
// `s.Pause(t); defer s.Resume(t)` is always safe.
func (s *Server) Resume(tb testing.TB) {
	tb.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return
	}
	if err := contProcess(s.proc.cmd.Process.Pid); err != nil {
		tb.Fatalf("redistest: Resume %s: %v", s.Addr, err)
	}
}

// PID returns the pid of the running redis-server process, or 0 if it is
// not running (killed, or after cleanup). It changes on Restart.
func (s *Server) PID() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.cmd.Process.Pid
}

// cleanup is registered with tb.Cleanup: kill, then release the port.
func (s *Server) cleanup() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.killLocked()
	s.closed = true
	if s.port != 0 {
		releasePort(s.port, s.cluster)
		s.port = 0
	}
}

// logTail returns the last lines of the server's log and of its
// stdout/stderr (where redis-server reports bad arguments).
func (s *Server) logTail() string {
	var b strings.Builder
	for _, f := range []string{s.logPath(), filepath.Join(s.dir, "stdout.log")} {
		data, err := os.ReadFile(f)
		if err != nil || len(strings.TrimSpace(string(data))) == 0 {
			continue
		}
		lines := strings.Split(strings.TrimRight(string(data), "\n"), "\n")
		if len(lines) > 20 {
			lines = lines[len(lines)-20:]
		}
		fmt.Fprintf(&b, "\n--- tail of %s ---\n%s", f, strings.Join(lines, "\n"))
	}
	if b.Len() == 0 {
		return "\n(no log output)"
	}
	return b.String()
}

// logTails is the logTail of each server, one after the other.
func logTails(servers ...*Server) string {
	var b strings.Builder
	for _, s := range servers {
		b.WriteString(s.logTail())
	}
	return b.String()
}
