package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed51c676c8/dlock/dlocktest"
)

// TestMain also serves as a host: run starts the test binary again with hostEnv set.
func TestMain(m *testing.M) {
	if cfg := os.Getenv(hostEnv); cfg != "" {
		os.Exit(hostMain(cfg))
	}
	goleak.VerifyTestMain(m)
}

func TestCronjob(t *testing.T) {
	out := runExample(t, "--redis", dlocktest.Start(t).URL, "--hosts", "3", "--every", "200ms", "--for", "2s")
	check(t, out, 3, 10)
}

func TestCronjobEmbeddedRedis(t *testing.T) {
	out := runExample(t, "--redis", "embedded", "--hosts", "2", "--every", "200ms", "--for", "1s")
	check(t, out, 2, 5)
}

func runExample(t *testing.T, args ...string) []byte {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var out bytes.Buffer
	err := run(ctx, args, &out)
	t.Logf("output:\n%s", out.Bytes())
	if err != nil {
		t.Fatalf("run: %v", err)
	}
	return out.Bytes()
}

var tickRE = regexp.MustCompile(`(?m)^ *(\d+)  (\d+)  \(.*\) +(\d+)  \(.*\)$`)

// check reads the table: without a lock the job ran on several hosts per tick (once per
// host unless a host missed the tick); with dlock exactly once per tick.
func check(t *testing.T, out []byte, hosts, ticks int) {
	t.Helper()
	rows := tickRE.FindAllSubmatch(out, -1)
	if len(rows) != ticks {
		t.Fatalf("the table has %d ticks, want %d", len(rows), ticks)
	}
	totalWithout := 0
	for _, m := range rows {
		without, _ := strconv.Atoi(string(m[2]))
		with, _ := strconv.Atoi(string(m[3]))
		totalWithout += without
		if without > hosts {
			t.Errorf("tick %s: %d runs without a lock on %d hosts", m[1], without, hosts)
		}
		if with != 1 {
			t.Errorf("tick %s: %d runs with dlock, want 1", m[1], with)
		}
	}
	if totalWithout <= ticks {
		t.Errorf("without a lock the job ran %d times for %d ticks: the failure did not show", totalWithout, ticks)
	}
}
