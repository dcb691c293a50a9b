//go:build !linux

package main

import (
	"syscall"
	"time"
)

// sysProcAttr: without Pdeathsig, children are stopped by the deferred cleanup and the
// signal handler only.
func sysProcAttr() *syscall.SysProcAttr { return nil }

// processCPU and selfCPU: not measured off Linux.
func processCPU(int) (time.Duration, bool) { return 0, false }
func selfCPU() (time.Duration, bool)       { return 0, false }

// fineTimerSlack and preciseSleep: the runtime's timers, whatever their precision.
func fineTimerSlack()              {}
func preciseSleep(d time.Duration) { time.Sleep(d) }

// monoNanos: the wall clock, one for every process too, but stepped by NTP.
func monoNanos() int64 { return time.Now().UnixNano() }

// monoClock names the clock of monoNanos in the report.
const monoClock = "the wall clock"
