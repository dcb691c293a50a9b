//go:build !unix

package faults

import "errors"

type sigName string

const (
	sigStop sigName = "SIGSTOP"
	sigCont sigName = "SIGCONT"
	sigKill sigName = "SIGKILL"
)

func signalPid(pid int, sig sigName) error {
	return errors.New("the fault suite needs POSIX signals")
}
