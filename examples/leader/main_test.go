package main

import (
	"bytes"
	"context"
	"os"
	"regexp"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed51c676c8/dlock/dlocktest"
)

// TestMain also serves as a worker: demo starts the test binary again with workerEnv set.
func TestMain(m *testing.M) {
	if cfg := os.Getenv(workerEnv); cfg != "" {
		os.Exit(workerMain(cfg))
	}
	goleak.VerifyTestMain(m)
}

func TestLeader(t *testing.T) {
	out := runExample(t, "--redis", dlocktest.Start(t).URL, "--workers", "3", "--ttl", "500ms", "--for", "3s")
	check(t, out)
}

func TestLeaderEmbeddedRedis(t *testing.T) {
	out := runExample(t, "--redis", "embedded", "--workers", "2", "--ttl", "500ms", "--for", "2s")
	check(t, out)
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

var (
	termRE     = regexp.MustCompile(`(?m)^ +\d+  worker-\d+ +\d+$`)
	tookOverRE = regexp.MustCompile(`worker-\d was killed; worker-\d led \d+ms later \(TTL 500ms\)`)
)

// check reads the report: at least two terms worked (the first leader's and its
// successor's), and the successor took over. (The observer may or may not see the
// election without a leader between them: the successor wakes at the expiry too.)
func check(t *testing.T, out []byte) {
	t.Helper()
	if n := len(termRE.FindAll(out, -1)); n < 2 {
		t.Errorf("%d terms did the work, want at least 2", n)
	}
	if !tookOverRE.Match(out) {
		t.Errorf("the report does not say who took over from the killed leader")
	}
}
