//go:build unix

package dlock_test

import (
	"bufio"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestGuardPausedProcess: a holder process stopped (SIGSTOP) past its lease, while another
// takes the lock and writes, wakes (SIGCONT) and writes with Guard: refused, ErrNotHeld
// and ErrLost, and nothing applied. On a Cluster the guarded key (Lease.Key) shares the
// lock's hash slot, and the worker is a Cluster client.
func TestGuardPausedProcess(t *testing.T) {
	onGuardDeployments(t, func(t *testing.T, d deployment) {
		ctx := ctxTimeout(t, 60*time.Second)
		cmd, stdin, out := startGuardWorker(t, d)
		if !out.Scan() || out.Text() != "held" {
			t.Fatalf("worker: %q, want held", out.Text())
		}
		if err := cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		next := mustLock(t, d.client().Mutex("guard-paused"), ctx) // once its lease has run out
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
		if n := d.nodes[0].Get(ctx, key).Val(); n != "1" {
			t.Fatalf("%s = %q, want 1: the paused holder's write was applied", key, n)
		}
		_ = next.Unlock(ctx)
	})
}

// startGuardWorker starts guardWorker on d in a process of its own, which the test's
// cleanup kills and waits for; it returns the process, its stdin and its stdout.
func startGuardWorker(t *testing.T, d deployment) (*exec.Cmd, io.Writer, *bufio.Scanner) {
	t.Helper()
	ctx := ctxTimeout(t, 60*time.Second)
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(d.processEnv(), workerEnv+"=1", workerMode+"=guardpause")
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
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	return cmd, stdin, bufio.NewScanner(stdout)
}
