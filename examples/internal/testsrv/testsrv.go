// Package testsrv starts the PostgreSQL server that the flash sale's tests run against, on
// a free loopback port, in a temporary directory, stopped when the test ends. A missing
// server binary fails the test with a message that says how to install it; it never
// skips. Their redis-server comes from dlocktest.Start, as in any user's tests.
package testsrv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
)

// errExited marks a server that exited before it answered: almost always a port taken
// between picking and binding, so the start is retried on another port.
var errExited = errors.New("exited before it answered")

// freePort returns a loopback port that is free right now.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, fmt.Errorf("listen on 127.0.0.1:0: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// proc is a started server process.
type proc struct {
	cmd    *exec.Cmd
	exited chan struct{} // closed when Wait returned
}

// start starts cmd with output to logPath; the kernel kills it if the test process dies
// (Linux).
func start(cmd *exec.Cmd, logPath string) (*proc, error) {
	log, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer log.Close() // the child has its own descriptor
	cmd.Stdout, cmd.Stderr = log, log
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	setPdeathsig(cmd.SysProcAttr)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, exited: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// waitReady calls ready until it succeeds, the process exits or timeout passes.
func (p *proc) waitReady(timeout time.Duration, ready func() error) error {
	deadline := time.Now().Add(timeout)
	for {
		err := ready()
		if err == nil {
			return nil
		}
		select {
		case <-p.exited:
			return errExited
		default:
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("not ready after %v: %w", timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends sig, waits up to grace for the process to exit, then kills it and waits.
func (p *proc) stop(sig os.Signal, grace time.Duration) {
	_ = p.cmd.Process.Signal(sig)
	select {
	case <-p.exited:
		return
	case <-time.After(grace):
	}
	_ = p.cmd.Process.Kill()
	<-p.exited
}

// tail returns the last lines of the file at path, for error messages.
func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 15 {
		lines = lines[len(lines)-15:]
	}
	return strings.Join(lines, "\n")
}
