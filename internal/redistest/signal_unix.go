//go:build unix

package redistest

import (
	"errors"
	"syscall"
)

func stopProcess(pid int) error { return syscall.Kill(pid, syscall.SIGSTOP) }
func contProcess(pid int) error { return syscall.Kill(pid, syscall.SIGCONT) }
func killProcess(pid int) error { return syscall.Kill(pid, syscall.SIGKILL) }

// processAlive reports whether a process with this pid exists (possibly
// owned by another user).
func processAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
