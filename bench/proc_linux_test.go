//go:build linux

package main

import (
	"os"
	"testing"
	"time"
)

// TestProcessCPUFinerThanTicks checks that processCPU counts this process's CPU as
// getrusage does, to well under the 10 ms tick of /proc/PID/stat: the hot-key rows divide
// 80 to 95 ms of redis-server's CPU by the grants, so a tick would move them by a ninth. A
// busy loop of some 25 ms (ticks would read 20 or 30) runs between two readings of each.
// A running thread's schedstat lags by up to a kernel tick (it is brought up to date when
// the thread stops running, as an idle redis-server's is), so each reading follows a
// sleep.
func TestProcessCPUFinerThanTicks(t *testing.T) {
	time.Sleep(10 * time.Millisecond)
	p0, ok0 := processCPU(os.Getpid())
	s0, _ := selfCPU()
	for start := time.Now(); time.Since(start) < 25*time.Millisecond; {
	}
	time.Sleep(10 * time.Millisecond)
	p1, ok1 := processCPU(os.Getpid())
	s1, _ := selfCPU()
	if !ok0 || !ok1 {
		t.Fatal("processCPU: no reading of this process")
	}
	dp, ds := p1-p0, s1-s0
	if ds < 5*time.Millisecond {
		t.Fatalf("the busy loop took %v of CPU, too little to compare", ds)
	}
	// A tick count would land on a multiple of 10 ms; schedstat within about 1 ms of
	// getrusage (which reads the same run times, and the reading's own cost).
	if diff := (dp - ds).Abs(); diff > 2*time.Millisecond {
		t.Errorf("processCPU grew by %v, getrusage by %v: %v apart, want ≤ 2ms", dp, ds, diff)
	}
}
