//go:build !unix

package main

import (
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// Outside Unix there are no process groups, no SIGSTOP, and only os.Interrupt and Kill.

const groupsSupported = false

var forwarded = []os.Signal{os.Interrupt}

var signalNames = map[syscall.Signal]string{}

// resizeSignals: none; top reads the terminal's size at every refresh.
var resizeSignals []os.Signal

func notifySignals() chan os.Signal {
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, forwarded...)
	return ch
}

func stopSignals(ch chan os.Signal) { signal.Stop(ch) }

func endsWait(os.Signal) bool { return true }

func childProcAttr(bool) *syscall.SysProcAttr { return nil }

func signalProcess(p *os.Process, _ bool, sig os.Signal) error {
	if sig == os.Interrupt {
		return p.Signal(sig)
	}
	return p.Kill()
}

func pause(*os.Process) error {
	return errors.New("pausing a process (SIGSTOP) is not supported on this system")
}

func resume(*os.Process) error { return nil }

func statusOf(ps *os.ProcessState) childStatus { return childStatus{exit: ps.ExitCode()} }
