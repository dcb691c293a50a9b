package dlockprom_test

import (
	"context"
	"os"
	"os/exec"
	"testing"
	"time"
)

// promtool returns the path of promtool: $PROMTOOL, else promtool on PATH. Without one the
// test fails, saying how to install it: the rules and the dashboard are never left
// unchecked.
func promtool(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("PROMTOOL"); p != "" {
		return p
	}
	p, err := exec.LookPath("promtool")
	if err != nil {
		t.Fatalf("promtool not found (%v): it checks the alert rules and the dashboard's queries. "+
			"Install it with 'make deps', or 'apt-get install prometheus' (Debian/Ubuntu, as root), "+
			"or 'brew install prometheus' (macOS); or set PROMTOOL=/path/to/promtool.", err)
	}
	return p
}

// runPromtool runs promtool with args in dir and fails the test, with its output, unless
// it succeeds.
func runPromtool(t *testing.T, dir string, args ...string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, promtool(t), args...)
	cmd.Dir = dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("promtool %q: %v\n%s", args, err, out)
	}
	t.Logf("promtool %q:\n%s", args, out)
}
