//go:build linux

package faults

import "syscall"

// sysProcAttr makes the kernel kill an agent when the suite dies, so that no holder
// outlives the run that started it.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
