package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// The tests run the dlock binary, built once by TestMain (with -race when the tests run
// with it), against real redis-server processes from internal/redistest.

// dlockBin is the path of the binary under test.
var dlockBin string

// runTimeout bounds every run of the binary.
const runTimeout = 90 * time.Second

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "dlock-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	dlockBin = filepath.Join(dir, "dlock")
	args := []string{"build", "-o", dlockBin}
	if raceEnabled {
		args = append(args, "-race")
	}
	build := exec.Command(goTool(), append(args, ".")...)
	if out, err := build.CombinedOutput(); err != nil {
		fmt.Fprintf(os.Stderr, "building dlock for the tests: %v\n%s", err, out)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	goleak.VerifyTestMain(m, goleak.Cleanup(func(code int) {
		os.RemoveAll(dir)
		os.Exit(code)
	}))
}

// goTool is the go command: 'go test' puts the one that runs the tests first on PATH.
func goTool() string { return "go" }

// result is how one run of dlock ended.
type result struct {
	code           int
	stdout, stderr string
	elapsed        time.Duration
}

func (r result) String() string {
	return fmt.Sprintf("exit %d after %v\n--- stdout:\n%s--- stderr:\n%s", r.code, r.elapsed.Round(time.Millisecond), r.stdout, r.stderr)
}

// proc is a run of dlock in the background.
type proc struct {
	t              *testing.T
	cmd            *exec.Cmd
	stdout, stderr syncBuffer
	start          time.Time
	done           chan struct{}
	err            error
	cancel         context.CancelFunc
}

// testEnv is the environment of every run: the test's, without DLOCK_ variables and
// REDIS_URL (which would name a server the test did not choose), plus env.
// A race-enabled binary would sleep a second at exit (GORACE atexit_sleep_ms): not here.
func testEnv(env []string) []string {
	var out []string
	gorace := "atexit_sleep_ms=0"
	for _, kv := range os.Environ() {
		switch {
		case strings.HasPrefix(kv, "DLOCK_"), strings.HasPrefix(kv, "REDIS_URL="):
		case strings.HasPrefix(kv, "GORACE="):
			gorace = strings.TrimPrefix(kv, "GORACE=") + " " + gorace
		default:
			out = append(out, kv)
		}
	}
	return append(append(out, "GORACE="+gorace), env...)
}

// startDlock runs dlock with args in the background; the test's cleanup kills it if it
// is still running.
func startDlock(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	p := &proc{t: t, done: make(chan struct{}), cancel: cancel}
	p.cmd = exec.CommandContext(ctx, dlockBin, args...)
	p.cmd.Env = testEnv(env)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	p.cmd.WaitDelay = 10 * time.Second // a child that keeps the pipes open fails the test
	p.start = time.Now()
	if err := p.cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start dlock: %v", err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		_ = p.cmd.Process.Kill()
		<-p.done
		cancel()
	})
	return p
}

// wait waits for the background run to end.
func (p *proc) wait() result {
	p.t.Helper()
	<-p.done
	p.cancel()
	var ee *exec.ExitError
	code := 0
	switch {
	case errors.Is(p.err, exec.ErrWaitDelay):
		p.t.Fatalf("dlock %v left processes holding its output open after it exited", p.cmd.Args[1:])
	case errors.As(p.err, &ee):
		code = ee.ExitCode()
		if code < 0 {
			p.t.Fatalf("dlock %v died: %v\n%s", p.cmd.Args[1:], p.err, p.stderr.String())
		}
	case p.err != nil:
		p.t.Fatalf("dlock %v: %v", p.cmd.Args[1:], p.err)
	}
	r := result{code: code, stdout: p.stdout.String(), stderr: p.stderr.String(), elapsed: time.Since(p.start)}
	if strings.Contains(r.stderr, "WARNING: DATA RACE") {
		p.t.Errorf("dlock %v has a data race:\n%s", p.cmd.Args[1:], r.stderr)
	}
	return r
}

// runBin runs dlock with args and env and returns how it ended.
func runBin(t *testing.T, env []string, args ...string) result {
	t.Helper()
	return startDlock(t, env, args...).wait()
}

// expect fails the test unless r has the exit code and its output contains every want.
func expect(t *testing.T, r result, code int, wants ...string) {
	t.Helper()
	if r.code != code {
		t.Fatalf("want exit %d; got %v", code, r)
	}
	all := r.stdout + r.stderr
	for _, w := range wants {
		if !strings.Contains(all, w) {
			t.Fatalf("want %q in the output; got %v", w, r)
		}
	}
}

// waitFor polls cond until it holds, failing the test after timeout.
func waitFor(t *testing.T, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", timeout, what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// syncBuffer is a bytes.Buffer safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}
