package testsrv

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// redisInstallHint says how to get redis-server.
const redisInstallHint = "install it with `apt-get install -y redis-server` (Debian/Ubuntu, as root) " +
	"or `brew install redis` (macOS), or run `make deps`; or set REDIS_SERVER=/path/to/redis-server"

// Redis starts a redis-server (no persistence) on a free loopback port and returns its
// URL, redis://127.0.0.1:PORT. It is killed when the test ends. The binary is
// $REDIS_SERVER, else redis-server from PATH; if there is none, the test fails.
func Redis(tb testing.TB) string {
	tb.Helper()
	bin := os.Getenv("REDIS_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	bin, err := exec.LookPath(bin)
	if err != nil {
		tb.Fatalf("testsrv: redis-server not found (%v); %s", err, redisInstallHint)
	}
	dir := tb.TempDir()
	for range 5 {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("testsrv: %v", err)
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		logPath := filepath.Join(dir, "redis.log")
		cmd := exec.Command(bin,
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1",
			"--save", "", "--appendonly", "no", "--protected-mode", "no",
			"--dir", dir, "--daemonize", "no")
		p, err := start(cmd, logPath)
		if err != nil {
			tb.Fatalf("testsrv: start %s: %v", bin, err)
		}
		err = p.waitReady(10*time.Second, func() error { return ping(addr) })
		if err == nil {
			tb.Cleanup(func() { p.stop(syscall.SIGKILL, 0) })
			return "redis://" + addr
		}
		p.stop(syscall.SIGKILL, 0)
		if !errors.Is(err, errExited) {
			tb.Fatalf("testsrv: redis-server on %s: %v\n%s", addr, err, tail(logPath))
		}
	}
	tb.Fatalf("testsrv: redis-server exited early 5 times (ports taken?):\n%s", tail(filepath.Join(dir, "redis.log")))
	return ""
}

// ping sends PING to the Redis server at addr and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil {
		return err
	}
	if !strings.HasPrefix(line, "+PONG") {
		return fmt.Errorf("PING answered %q", strings.TrimSpace(line))
	}
	return nil
}
