package redistest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

// gone waits until pid no longer exists (our servers are reaped by their
// waiting goroutine).
func gone(t *testing.T, pid int) {
	t.Helper()
	for range 200 {
		if !processAlive(pid) {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("process %d still alive", pid)
}

func TestStartAndCleanup(t *testing.T) {
	t.Parallel()
	var pid int
	var addr string
	t.Run("inner", func(t *testing.T) {
		s := Start(t)
		pid, addr = s.PID(), s.Addr
		if pid <= 0 {
			t.Fatalf("PID() = %d", pid)
		}
		if want := fmt.Sprintf("127.0.0.1:%d", s.Port); s.Addr != want {
			t.Fatalf("Addr = %q, want %q", s.Addr, want)
		}
		c := s.Client(t)
		if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
			t.Fatal(err)
		}
		if v, err := c.Get(ctx, "k").Result(); err != nil || v != "v" {
			t.Fatalf("GET = %q, %v", v, err)
		}
		matches, _ := filepath.Glob(filepath.Join(pidDir, fmt.Sprintf("%d-%d.pid", os.Getpid(), pid)))
		if len(matches) != 1 {
			t.Fatalf("no pid file for %d in %s", pid, pidDir)
		}
	})
	gone(t, pid)
	if _, err := os.Stat(filepath.Join(pidDir, fmt.Sprintf("%d-%d.pid", os.Getpid(), pid))); !os.IsNotExist(err) {
		t.Fatalf("pid file still there after cleanup: %v", err)
	}
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatalf("%s still accepts connections after cleanup", addr)
	}
}

func TestWithArgs(t *testing.T) {
	t.Parallel()
	s := Start(t, WithArgs("--notify-keyspace-events", "Kgx"))
	got, err := s.Client(t).ConfigGet(ctx, "notify-keyspace-events").Result()
	if err != nil {
		t.Fatal(err)
	}
	// Redis normalises the flags; "g" and "x" and "K" must be there.
	for _, f := range "Kgx" {
		if !strings.ContainsRune(got["notify-keyspace-events"], f) {
			t.Fatalf("notify-keyspace-events = %q, want flags Kgx", got["notify-keyspace-events"])
		}
	}
	cfg, err := s.Client(t).ConfigGet(ctx, "save").Result()
	if err != nil || cfg["save"] != "" {
		t.Fatalf("save = %q, %v; want persistence off", cfg["save"], err)
	}
}

func TestPassword(t *testing.T) {
	t.Parallel()
	s := Start(t, WithPassword("s3cret"))
	if err := s.Client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("PING with password: %v", err)
	}
	for _, pw := range []string{"wrong", ""} {
		opts := s.Options()
		opts.Password = pw
		c := redis.NewClient(opts)
		err := c.Ping(ctx).Err()
		c.Close()
		if err == nil {
			t.Fatalf("PING with password %q succeeded", pw)
		}
		if !strings.Contains(err.Error(), "WRONGPASS") && !strings.Contains(err.Error(), "NOAUTH") {
			t.Fatalf("PING with password %q: unexpected error %v", pw, err)
		}
	}
}

func TestKillRestart(t *testing.T) {
	t.Parallel()
	s := Start(t)
	c := s.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	pid, addr := s.PID(), s.Addr
	s.Kill(t)
	s.Kill(t) // idempotent
	if s.PID() != 0 {
		t.Fatalf("PID() = %d after Kill", s.PID())
	}
	gone(t, pid)
	if conn, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
		conn.Close()
		t.Fatal("a killed server accepts connections")
	}
	s.Restart(t)
	if s.Addr != addr || s.PID() == pid || s.PID() == 0 {
		t.Fatalf("after Restart: Addr %q (was %q), PID %d (was %d)", s.Addr, addr, s.PID(), pid)
	}
	if err := c.Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
		t.Fatalf("GET after Restart: %v, want redis.Nil (empty dataset)", err)
	}
	if n, err := c.DBSize(ctx).Result(); err != nil || n != 0 {
		t.Fatalf("DBSIZE after Restart = %d, %v", n, err)
	}
	s.Restart(t) // restarting a running server works too
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestRestartPortBusy(t *testing.T) {
	t.Parallel()
	s := Start(t)
	s.Kill(t)
	// Another process holds the port for a while: Restart retries.
	l, err := net.Listen("tcp", s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(300*time.Millisecond, func() { l.Close() })
	defer timer.Stop()
	s.Restart(t)
	if err := s.Client(t).Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
}

func TestStartFailureMessage(t *testing.T) {
	t.Parallel()
	s := newServer(t, newConfig([]Option{WithArgs("--no-such-directive", "x")}), false)
	err := s.startFresh()
	if !errors.Is(err, errExitedEarly) {
		t.Fatalf("start with a bad argument: %v, want errExitedEarly", err)
	}
	if !strings.Contains(err.Error(), "no-such-directive") || !strings.Contains(err.Error(), "--- tail of") {
		t.Fatalf("error lacks the log tail: %v", err)
	}
	if s.PID() != 0 {
		t.Fatalf("PID() = %d after a failed start", s.PID())
	}
}

func TestPauseResume(t *testing.T) {
	t.Parallel()
	s := Start(t)
	opts := s.Options()
	opts.ReadTimeout = 200 * time.Millisecond
	opts.MaxRetries = -1
	c := redis.NewClient(opts)
	defer c.Close()
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	s.Pause(t)
	err := c.Ping(ctx).Err()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("PING on a paused server: %v, want a timeout", err)
	}
	s.Resume(t)
	s.Resume(t) // not paused: no-op
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Resume: %v", err)
	}
	s.Pause(t)
	s.Kill(t)   // kills a paused server
	s.Resume(t) // not running: no-op
	s.Restart(t)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Pause, Kill, Restart: %v", err)
	}

	// A server still paused when its test ends is killed by the cleanup.
	var pid int
	t.Run("paused at cleanup", func(t *testing.T) {
		s := Start(t)
		s.Pause(t)
		pid = s.PID()
	})
	gone(t, pid)
}

func TestStartNodes(t *testing.T) {
	t.Parallel()
	nodes := StartNodes(t, 5)
	if len(nodes) != 5 {
		t.Fatalf("got %d nodes", len(nodes))
	}
	seen := map[string]bool{}
	for _, n := range nodes {
		if seen[n.Addr] {
			t.Fatalf("duplicate address %s", n.Addr)
		}
		seen[n.Addr] = true
	}
	if err := nodes[0].Client(t).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes[1:] {
		if err := n.Client(t).Get(ctx, "k").Err(); !errors.Is(err, redis.Nil) {
			t.Fatalf("%s: GET k = %v, want redis.Nil (independent servers)", n.Addr, err)
		}
	}
}

func TestCluster(t *testing.T) {
	t.Parallel()
	start := time.Now()
	cl := StartCluster(t, 3)
	t.Logf("3-master cluster formed in %v", time.Since(start))
	if len(cl.Servers) != 3 || len(cl.Addrs) != 3 {
		t.Fatalf("got %d servers, %d addrs", len(cl.Servers), len(cl.Addrs))
	}
	c := cl.Client(t)
	for i := range 100 {
		if err := c.Set(ctx, fmt.Sprintf("key-%d", i), i, 0).Err(); err != nil {
			t.Fatalf("SET key-%d: %v", i, err)
		}
	}
	for i := range 100 {
		if v, err := c.Get(ctx, fmt.Sprintf("key-%d", i)).Int(); err != nil || v != i {
			t.Fatalf("GET key-%d = %d, %v", i, v, err)
		}
	}
	total := int64(0)
	for _, s := range cl.Servers {
		n, err := s.Client(t).DBSize(ctx).Result()
		if err != nil {
			t.Fatal(err)
		}
		if n == 0 {
			t.Fatalf("%s holds no keys: slots not spread", s.Addr)
		}
		total += n
	}
	if total != 100 {
		t.Fatalf("%d keys across the masters, want 100", total)
	}

	// A killed and restarted node rejoins with its slots, empty.
	node := cl.Servers[2]
	restartAt := time.Now()
	node.Kill(t)
	node.Restart(t)
	nc := node.Client(t)
	deadline := time.Now().Add(15 * time.Second)
	for {
		n, err := nc.DBSize(ctx).Result()
		if err != nil || n != 0 {
			t.Fatalf("restarted node: DBSIZE = %d, %v; want 0", n, err)
		}
		info, err := nc.ClusterInfo(ctx).Result()
		if err == nil && infoField(info, "cluster_state") == "ok" && c.Set(ctx, "after-restart", 1, 0).Err() == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("restarted node did not rejoin: %q, %v", info, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("node restarted and rejoined in %v", time.Since(restartAt))
}

func TestClusterPassword(t *testing.T) {
	t.Parallel()
	cl := StartCluster(t, 2, WithPassword("pw"))
	c := cl.Client(t)
	if err := c.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatal(err)
	}
	opts := cl.Options()
	opts.Password = "wrong"
	bad := redis.NewClusterClient(opts)
	defer bad.Close()
	if err := bad.Set(ctx, "k", "v", 0).Err(); err == nil {
		t.Fatal("SET with a wrong password succeeded")
	}
}

func TestMissingBinaryMessage(t *testing.T) {
	t.Setenv("REDIS_SERVER", filepath.Join(t.TempDir(), "no-such-redis-server"))
	_, err := redisBinary()
	if err == nil {
		t.Fatal("no error for a missing binary")
	}
	for _, want := range []string{"apt-get install -y redis-server", "brew install redis", "make test"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("message %q does not mention %q", err, want)
		}
	}
	t.Setenv("REDIS_SERVER", "")
	t.Setenv("PATH", t.TempDir())
	if _, err := redisBinary(); err == nil || !strings.Contains(err.Error(), "apt-get install -y redis-server") {
		t.Errorf("redis-server not on PATH: %v", err)
	}
}

func TestSweepLeftovers(t *testing.T) {
	t.Parallel()
	bin, err := redisBinary()
	if err != nil {
		t.Fatal(err)
	}
	// A dead owner: a process that has exited and been reaped.
	dead := exec.Command(bin, "--version")
	if err := dead.Run(); err != nil {
		t.Fatal(err)
	}
	deadOwner := dead.Process.Pid

	writeRecord := func(owner, pid int, dir string) string {
		t.Helper()
		if err := os.MkdirAll(pidDir, 0o755); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(pidDir, fmt.Sprintf("%d-%d.pid", owner, pid))
		if err := os.WriteFile(path, fmt.Appendf(nil, "owner=%d\nredis=%d\ndir=%s\n", owner, pid, dir), 0o644); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(path) })
		return path
	}

	// An orphaned redis-server (started without Pdeathsig or pid file).
	port, err := reservePort(false)
	if err != nil {
		t.Fatal(err)
	}
	defer releasePort(port, false)
	dir := t.TempDir()
	orphan := exec.Command(bin, "--port", fmt.Sprint(port), "--bind", "127.0.0.1", "--save", "", "--dir", dir, "--logfile", filepath.Join(dir, "redis.log"))
	orphan.Dir = dir
	if err := orphan.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- orphan.Wait() }()
	defer func() {
		orphan.Process.Kill()
		<-exited
	}()
	orphanFile := writeRecord(deadOwner, orphan.Process.Pid, dir)

	// An unrelated process recorded with a dead owner must not be killed.
	unrelated := exec.Command("sleep", "30")
	if err := unrelated.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() {
		unrelated.Process.Kill()
		unrelated.Wait()
	}()
	unrelatedFile := writeRecord(deadOwner, unrelated.Process.Pid, dir)

	// A redis-server in another directory (pid reused) must not be killed.
	other := Start(t)
	otherFile := writeRecord(deadOwner, other.PID(), t.TempDir())

	// Give the orphan a moment to chdir/set its title.
	time.Sleep(100 * time.Millisecond)
	// The orphan is killed by this sweep, or by the first-Start sweep of
	// another test process running at the same time (its record has a dead
	// owner): either way it must end by SIGKILL.
	killed := sweepLeftovers(false)
	for _, pid := range []int{unrelated.Process.Pid, other.PID()} {
		if slices.Contains(killed, pid) {
			t.Fatalf("sweep killed unrelated pid %d", pid)
		}
	}
	select {
	case err := <-exited:
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
			t.Fatalf("orphan exited with %v, want SIGKILL", err)
		}
		exited <- err // for the deferred wait
	case <-time.After(5 * time.Second):
		t.Fatal("orphan not killed")
	}
	if err := unrelated.Process.Signal(syscall.Signal(0)); err != nil {
		t.Fatalf("unrelated process was hurt: %v", err)
	}
	if err := other.Client(t).Ping(ctx).Err(); err != nil {
		t.Fatalf("other redis-server was hurt: %v", err)
	}
	for _, f := range []string{orphanFile, unrelatedFile, otherFile} {
		if _, err := os.Stat(f); !os.IsNotExist(err) {
			t.Errorf("pid file %s not removed", f)
		}
	}
}
