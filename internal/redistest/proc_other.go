//go:build !linux

package redistest

import (
	"syscall"
	"time"
)

// sysProcAttr: Pdeathsig exists only on Linux; elsewhere the pid files and
// the leftover sweep (leftovers.go) are the only protection against servers
// outliving a crashed test process.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// waitStopped cannot observe the process state portably; SIGSTOP is
// delivered promptly anyway.
func waitStopped(pid int) {}

// SelfCPU: not read here; ReportCPU reports nothing.
func SelfCPU() time.Duration { return 0 }
