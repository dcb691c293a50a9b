package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/seed51c676c8/dlock"
)

// child is the command that 'dlock run' runs under the lock.
type child struct {
	cmd   *exec.Cmd
	group bool          // in its own process group: signals go to the whole group
	done  chan struct{} // closed when cmd.Wait returned
}

// startChild starts command with DLOCK_NAME and DLOCK_TOKEN in its environment. Unless
// foreground is set, it runs in its own process group, with /dev/null as stdin when
// dlock's stdin is a terminal (a background process group cannot read it). A command that
// cannot be started gives exit 127 (not found) or 126 (cannot be executed).
func startChild(c *cli, command []string, foreground bool, name string, token uint64) (*child, error) {
	cmd := exec.Command(command[0], command[1:]...)
	cmd.Env = append(withoutVars(os.Environ(), "DLOCK_NAME", "DLOCK_TOKEN", workerServersEnv),
		"DLOCK_NAME="+name, "DLOCK_TOKEN="+strconv.FormatUint(token, 10))
	cmd.Stdin, cmd.Stdout, cmd.Stderr = c.stdin, c.stdoutFile, c.stderrFile
	if !foreground && isTerminal(c.stdin) {
		devNull, err := os.Open(os.DevNull)
		if err != nil {
			return nil, fail(exitFailure, "cannot open %s for the command's stdin: %v", os.DevNull, err)
		}
		defer devNull.Close()
		cmd.Stdin = devNull
	}
	cmd.SysProcAttr = childProcAttr(!foreground)
	if err := cmd.Start(); err != nil {
		return nil, startError(command[0], err)
	}
	ch := &child{cmd: cmd, group: !foreground && groupsSupported, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(ch.done)
	}()
	return ch, nil
}

// startError explains why the command did not start: 127 when it does not exist, 126
// otherwise, as shells do.
func startError(name string, err error) error {
	switch {
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, fs.ErrNotExist):
		return fail(exitNotFound, "%s: command not found (check the name and PATH); nothing was run", name)
	case errors.Is(err, fs.ErrPermission):
		return fail(exitCannotExec, "%s: permission denied: the file is not executable; nothing was run", name)
	}
	return fail(exitCannotExec, "%s: cannot execute: %v; nothing was run", name, err)
}

// withoutVars returns env without the variables named.
func withoutVars(env []string, names ...string) []string {
	out := env[:0:0]
	for _, kv := range env {
		k, _, _ := strings.Cut(kv, "=")
		drop := false
		for _, n := range names {
			drop = drop || k == n
		}
		if !drop {
			out = append(out, kv)
		}
	}
	return out
}

// isTerminal reports whether f is a character device, such as a terminal. (/dev/null is
// one too; treating it as a terminal costs nothing here.)
func isTerminal(f *os.File) bool {
	if f == nil {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

// signal sends sig to the command (its whole process group, unless --foreground).
func (ch *child) signal(sig os.Signal) {
	_ = signalProcess(ch.cmd.Process, ch.group, sig)
}

// superviseChild waits for the command to exit, forwarding signals. When the lease is lost
// it tells the user, sends SIGTERM, then SIGKILL after grace, and once the command has
// exited kills what is left of its process group. It returns how the command ended and
// whether the lease was lost.
func superviseChild(c *cli, ch *child, lease *dlock.Lease, sigs <-chan os.Signal, grace time.Duration, name string) (childStatus, bool) {
	leaseDone := lease.Done()
	var kill <-chan time.Time
	lost := false
	for {
		select {
		case <-ch.done:
			if lost && ch.group {
				_ = signalProcess(ch.cmd.Process, true, syscall.SIGKILL)
			}
			return statusOf(ch.cmd.ProcessState), lost
		case sig := <-sigs:
			ch.signal(sig)
		case <-leaseDone:
			leaseDone = nil
			if lease.Err() != dlock.ErrLost {
				continue
			}
			lost = true
			fmt.Fprintf(c.stderr, "dlock run: lost the lock %q while the command ran (its key expired, was deleted or taken, or renewal failed until the lease ran out); stopping the command: SIGTERM now, SIGKILL in %v\n", name, grace)
			ch.signal(syscall.SIGTERM)
			t := time.NewTimer(grace)
			defer t.Stop()
			kill = t.C
		case <-kill:
			kill = nil
			ch.signal(syscall.SIGKILL)
		}
	}
}

// childStatus is how the command ended.
type childStatus struct {
	exit   int            // exit code, when not signalled
	sig    syscall.Signal // the signal that killed it, when signalled
	killed bool
}

func (s childStatus) code() int {
	if s.killed {
		return exitSignalBase + int(s.sig)
	}
	return s.exit
}

func (s childStatus) String() string {
	if s.killed {
		return "the command died from " + signalName(s.sig)
	}
	return fmt.Sprintf("the command exited with code %d", s.exit)
}

// signalName names common signals as "SIGTERM"; others as "signal N".
func signalName(sig syscall.Signal) string {
	if n, ok := signalNames[sig]; ok {
		return n
	}
	return fmt.Sprintf("signal %d", int(sig))
}
