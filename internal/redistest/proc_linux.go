//go:build linux

package redistest

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// sysProcAttr makes the kernel SIGKILL the redis-server when the test
// process dies. (Strictly: when the OS thread that started it exits; the Go
// runtime only ends threads of goroutines that die while locked to their
// thread, so this holds for ordinary tests.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// waitStopped waits (up to 2 s) until the process is in the stopped state,
// so that Pause returns only once the server no longer runs.
func waitStopped(pid int) {
	deadline := time.Now().Add(2 * time.Second)
	for time.Now().Before(deadline) {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			return
		}
		// Format: "pid (comm) S ...": the state follows the last ')'.
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 && i+2 < len(s) {
			if st := s[i+2]; st == 'T' || st == 't' {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
}

// SelfCPU is the CPU time (user and system) the calling process has used so far: a
// benchmark reports its client's CPU per operation from two readings (ReportCPU).
func SelfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
