//go:build unix

package main

import (
	"os"
	"os/signal"
	"syscall"
)

// groupsSupported: the command runs in its own process group (see startChild).
const groupsSupported = true

// forwarded are the signals that 'dlock run' passes on to the command.
var forwarded = []os.Signal{syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP, syscall.SIGQUIT, syscall.SIGUSR1, syscall.SIGUSR2}

var signalNames = map[syscall.Signal]string{
	syscall.SIGHUP: "SIGHUP", syscall.SIGINT: "SIGINT", syscall.SIGQUIT: "SIGQUIT", syscall.SIGKILL: "SIGKILL",
	syscall.SIGTERM: "SIGTERM", syscall.SIGUSR1: "SIGUSR1", syscall.SIGUSR2: "SIGUSR2", syscall.SIGSEGV: "SIGSEGV",
	syscall.SIGABRT: "SIGABRT", syscall.SIGPIPE: "SIGPIPE", syscall.SIGALRM: "SIGALRM",
}

// resizeSignals tell top that the terminal changed size.
var resizeSignals = []os.Signal{syscall.SIGWINCH}

// notifySignals starts catching the forwarded signals.
func notifySignals() chan os.Signal {
	ch := make(chan os.Signal, 16)
	signal.Notify(ch, forwarded...)
	return ch
}

func stopSignals(ch chan os.Signal) { signal.Stop(ch) }

// endsWait reports whether sig, received while waiting for the lock, ends the wait.
func endsWait(sig os.Signal) bool { return sig != syscall.SIGUSR1 && sig != syscall.SIGUSR2 }

// childProcAttr puts the child in its own process group when group is set.
func childProcAttr(group bool) *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: group}
}

// signalProcess sends sig to p, or to p's process group (p leads it) when group is set.
func signalProcess(p *os.Process, group bool, sig os.Signal) error {
	s, ok := sig.(syscall.Signal)
	if !ok || !group {
		return p.Signal(sig)
	}
	return syscall.Kill(-p.Pid, s)
}

// pause stops p with SIGSTOP, as a long GC pause or a stopped VM would (the demo's
// frozen buyer); resume lets it go on.
func pause(p *os.Process) error { return p.Signal(syscall.SIGSTOP) }

// resume sends SIGCONT to p.
func resume(p *os.Process) error { return p.Signal(syscall.SIGCONT) }

// statusOf reads how a process ended.
func statusOf(ps *os.ProcessState) childStatus {
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return childStatus{killed: true, sig: ws.Signal()}
	}
	return childStatus{exit: ps.ExitCode()}
}
