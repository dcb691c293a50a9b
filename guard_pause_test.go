//go:build unix

package dlock_test

import (
	"bufio"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGuardPausedProcess: a holder process stopped (SIGSTOP) past its lease, while another
// takes the lock and writes, wakes (SIGCONT) and writes with Guard: refused, ErrNotHeld
// and ErrLost, and nothing applied.
func TestGuardPausedProcess(t *testing.T) {
	srv, rdb := standalone(t)
	ctx := ctxTimeout(t, 60*time.Second)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), workerEnv+"=1", workerAddrs+"="+srv.Addr, workerMode+"=guardpause")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	out := bufio.NewScanner(stdout)
	if !out.Scan() || out.Text() != "held" {
		t.Fatalf("worker: %q, want held", out.Text())
	}
	if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	next := mustLock(t, newClient(t, rdb).Mutex("guard-paused"), ctx) // once its lease has run out
	key := next.Key("n")
	if err := guardIncr(ctx, next, key); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	if _, err := stdin.Write([]byte("write\n")); err != nil {
		t.Fatal(err)
	}
	if !out.Scan() || !strings.HasPrefix(out.Text(), "guard: not-held=true lost=true: ") {
		t.Fatalf("the woken worker's Guard: %q, want a refusal with ErrNotHeld and ErrLost", out.Text())
	}
	t.Log(out.Text())
	if n := rdb.Get(ctx, key).Val(); n != "1" {
		t.Fatalf("%s = %q, want 1: the paused holder's write was applied", key, n)
	}
	_ = next.Unlock(ctx)
}
