package main

import (
	"slices"
	"strings"
	"testing"
	"time"
)

// TestRespScanner counts the commands of a stream however it is cut into writes.
func TestRespScanner(t *testing.T) {
	stream := "*2\r\n$4\r\nPING\r\n$3\r\na\nb\r\n" + // a bulk string with a newline inside
		"*3\r\n$7\r\nEVALSHA\r\n$40\r\n" + strings.Repeat("f", 40) + "\r\n$1\r\n0\r\n" +
		"*1\r\n$0\r\n\r\n" +
		"*2\r\n$3\r\nGET\r\n$12\r\n*2\r\n$3\r\nabc\r\n" // a value that looks like a command
	for cut := range len(stream) {
		for step := 1; step <= 7; step++ {
			var s respScanner
			n := s.commands([]byte(stream[:cut]))
			for i := cut; i < len(stream); i += step {
				n += s.commands([]byte(stream[i:min(i+step, len(stream))]))
			}
			if n != 4 {
				t.Fatalf("cut at %d, then every %d bytes: %d commands, want 4", cut, step, n)
			}
		}
	}
}

// A variant runs only where --libs names it, in the scenarios of the library it varies.
func TestSelectedLibsRunVariantsOnlyWhenNamed(t *testing.T) {
	if got := selectedLibs(scThroughput, nil); slices.Contains(got, libDlockNoOwner) {
		t.Errorf("throughput, no --libs: %v, want no variant", got)
	}
	named := []string{libDlock, libDlockNoOwner}
	if got := selectedLibs(scThroughput, named); !slices.Equal(got, named) {
		t.Errorf("throughput, --libs %v: %v", named, got)
	}
	if got := selectedLibs(scFair, named); len(got) != 0 {
		t.Errorf("fair, --libs %v: %v, want none (neither is fair)", named, got)
	}
	if err := checkConfig(benchConfig{Libs: named, Runs: 1, Duration: time.Second, Leases: 1, LeaseTTL: time.Second}); err != nil {
		t.Errorf("--libs %v: %v", named, err)
	}
}
