//go:build linux

package main

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
	"unsafe"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// sysProcAttr makes the kernel SIGKILL a child (redis-server, worker) when this process
// dies, even by SIGKILL. (Strictly: when the OS thread that started it exits; the Go
// runtime only ends threads locked by goroutines that exit, which this program has none of.)
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}

// processCPU returns the CPU time that process pid has used so far: the sum of its
// threads' run times in /proc/PID/task/*/schedstat, in nanoseconds. /proc/PID/stat counts
// in 10 ms ticks, too coarse for a hot-key run: the Mutex's redis-server spends 80 to 95 ms
// in one, so a tick was a ninth of it. A thread that exited takes its time with it, which
// redis-server's threads, made at start, do not. Without schedstat, the ticks.
func processCPU(pid int) (time.Duration, bool) {
	if d, err := threadsRunTime(pid); err == nil {
		return d, true
	}
	return processTicks(pid)
}

// threadsRunTime sums the first field of /proc/PID/task/*/schedstat ("run_ns wait_ns
// timeslices"): the time each thread of pid has run.
func threadsRunTime(pid int) (time.Duration, error) {
	dir := "/proc/" + strconv.Itoa(pid) + "/task"
	tasks, err := os.ReadDir(dir)
	if err != nil || len(tasks) == 0 {
		return 0, errors.Join(errors.New("no threads listed"), err)
	}
	var sum time.Duration
	for _, t := range tasks {
		b, err := os.ReadFile(dir + "/" + t.Name() + "/schedstat")
		if err != nil {
			return 0, err
		}
		run, _, _ := strings.Cut(string(b), " ")
		ns, err := strconv.ParseInt(strings.TrimSpace(run), 10, 64)
		if err != nil {
			return 0, err
		}
		sum += time.Duration(ns)
	}
	return sum, nil
}

// processTicks returns the CPU time (user + system) of process pid from /proc/PID/stat,
// in 10 ms ticks.
func processTicks(pid int) (time.Duration, bool) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, false
	}
	// "pid (comm) state ppid ...": utime and stime are the 14th and 15th fields, the
	// 12th and 13th after the ')'.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	k, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	const clockTick = 10 * time.Millisecond // USER_HZ is 100 on Linux
	return time.Duration(u+k) * clockTick, true
}

// selfCPU returns the CPU time (user + system) this process has used so far.
func selfCPU() (time.Duration, bool) {
	used := redistest.SelfCPU()
	return used, used > 0
}

// fineTimerSlack sets the calling thread's timer slack to 1 ns (the default, 50 µs, is
// added to every sleep of the delay proxy). Call it on a locked thread.
func fineTimerSlack() {
	const prSetTimerSlack = 29
	_, _, _ = syscall.RawSyscall(syscall.SYS_PRCTL, prSetTimerSlack, 1, 0)
}

// preciseSleep blocks the calling thread for d with nanosleep: the Go runtime's timers
// wake a sleeping program through epoll_pwait, in whole milliseconds (see proxyEnv).
func preciseSleep(d time.Duration) {
	ts := syscall.NsecToTimespec(int64(d))
	_ = syscall.Nanosleep(&ts, nil)
}

// monoNanos reads CLOCK_MONOTONIC, which on Linux is one clock for every process of the
// machine (unlike Go's monotonic readings, whose origin is private to each process) and
// is not stepped by NTP like the wall clock.
func monoNanos() int64 {
	const clockMonotonic = 1
	var ts syscall.Timespec
	_, _, _ = syscall.Syscall(syscall.SYS_CLOCK_GETTIME, clockMonotonic, uintptr(unsafe.Pointer(&ts)), 0)
	return ts.Nano()
}

// monoClock names the clock of monoNanos in the report.
const monoClock = "CLOCK_MONOTONIC"
