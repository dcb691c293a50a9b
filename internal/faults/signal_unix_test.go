//go:build unix

package faults

import "syscall"

type sigName string

const (
	sigStop sigName = "SIGSTOP"
	sigCont sigName = "SIGCONT"
	sigKill sigName = "SIGKILL"
)

var signals = map[sigName]syscall.Signal{sigStop: syscall.SIGSTOP, sigCont: syscall.SIGCONT, sigKill: syscall.SIGKILL}

// signalPid sends sig to the one process pid: never to a group or by name.
func signalPid(pid int, sig sigName) error { return syscall.Kill(pid, signals[sig]) }
