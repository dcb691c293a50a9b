package main

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
	"time"
)

// installHint says how to get redis-server.
const installHint = "install it with `apt-get install -y redis-server` (Debian/Ubuntu, as root) or " +
	"`brew install redis` (macOS), or run `make deps`; set REDIS_SERVER=/path/to/redis-server to use a specific binary"

// redisBinary returns the redis-server to run: $REDIS_SERVER if set, else the one on PATH.
func redisBinary() (string, error) {
	if p := os.Getenv("REDIS_SERVER"); p != "" {
		if _, err := exec.LookPath(p); err != nil {
			return "", fmt.Errorf("REDIS_SERVER=%q is not an executable redis-server (%v); %s", p, err, installHint)
		}
		return p, nil
	}
	p, err := exec.LookPath("redis-server")
	if err != nil {
		return "", fmt.Errorf("redis-server not found on PATH; the benchmark starts its own servers: %s", installHint)
	}
	return p, nil
}

// redisVersion returns what `redis-server --version` says, shortened to its version.
func redisVersion(bin string) string {
	out, err := exec.Command(bin, "--version").Output()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	s := strings.TrimSpace(string(out))
	for _, f := range strings.Fields(s) {
		if v, ok := strings.CutPrefix(f, "v="); ok {
			return v
		}
	}
	return s
}

// server is one redis-server process on a loopback port, with persistence off.
type server struct {
	Addr string
	cmd  *exec.Cmd
	dir  string
	done chan struct{}
}

// startServers starts n redis-server processes on free loopback ports. On error, the ones
// already started are stopped.
func startServers(bin string, n int) ([]*server, error) {
	var out []*server
	for range n {
		s, err := startServer(bin)
		if err != nil {
			stopServers(out)
			return nil, err
		}
		out = append(out, s)
	}
	return out, nil
}

func stopServers(ss []*server) {
	for _, s := range ss {
		s.stop()
	}
}

// startServer tries a few free ports: another process may take a port between the probe
// and the server's bind.
func startServer(bin string) (*server, error) {
	var lastErr error
	for range 5 {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		s, err := spawnServer(bin, port)
		if err == nil {
			return s, nil
		}
		lastErr = err
	}
	return nil, lastErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("listen on 127.0.0.1:0: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func spawnServer(bin string, port int) (*server, error) {
	dir, err := os.MkdirTemp("", "dlock-bench-redis-")
	if err != nil {
		return nil, err
	}
	log, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	cmd := exec.Command(bin,
		"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--protected-mode", "no",
		"--save", "", "--appendonly", "no", "--dir", dir, "--daemonize", "no")
	cmd.Stdout, cmd.Stderr = log, log // *os.File: no copying goroutine
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	log.Close()
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("start %s: %w", bin, err)
	}
	s := &server{Addr: "127.0.0.1:" + strconv.Itoa(port), cmd: cmd, dir: dir, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(s.done)
	}()
	if err := s.waitReady(5 * time.Second); err != nil {
		s.stop()
		return nil, err
	}
	return s, nil
}

// waitReady polls until this server answers PING.
func (s *server) waitReady(timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for {
		select {
		case <-s.done:
			return fmt.Errorf("redis-server on %s exited at start: %s", s.Addr, s.logTail())
		default:
		}
		if err := ping(s.Addr); err == nil {
			return nil
		} else if time.Now().After(deadline) {
			return fmt.Errorf("redis-server on %s did not answer PING within %v: %v", s.Addr, timeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

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
	if strings.TrimSpace(line) != "+PONG" {
		return errors.New("unexpected reply " + strconv.Quote(line))
	}
	return nil
}

func (s *server) logTail() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "redis.log"))
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) > 5 {
		lines = lines[len(lines)-5:]
	}
	return strings.Join(lines, " | ")
}

// stop kills the server (SIGKILL: nothing to persist) and removes its directory.
func (s *server) stop() {
	_ = s.cmd.Process.Kill()
	<-s.done
	os.RemoveAll(s.dir)
}
