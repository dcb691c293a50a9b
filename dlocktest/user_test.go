package dlocktest_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// userTimeout bounds each of TestAsAUser's go commands, which may download and build
// modules (about 3 minutes with an empty build cache).
const userTimeout = 8 * time.Minute

// userGoMod is the go.mod of a module of dlock's users; %s is this repository's root.
const userGoMod = `module example.com/checkout

go 1.26

require github.com/seed51c676c8/dlock v0.0.0

replace github.com/seed51c676c8/dlock => %s
`

// userTest is a test of that module, written against the public API only.
const userTest = `package checkout

import (
	"context"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
)

func TestCheckout(t *testing.T) {
	for name, client := range map[string]*dlock.Client{
		"server":   dlocktest.Server(t),
		"embedded": dlocktest.Embedded(t),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			var stock dlocktest.FencedStore[int]
			mu := client.Mutex("stock", dlock.TTL(200*time.Millisecond), dlock.NoRenew())
			lease, err := mu.Lock(ctx)
			if err != nil {
				t.Fatal(err)
			}
			dlocktest.RanUnderLock(t, mu, func() {
				if err := stock.Put("item", 9, lease.Token()); err != nil {
					t.Error(err)
				}
			})
			dlocktest.AssertLost(t, lease, 5*time.Second)
		})
	}
}
`

// TestAsAUser builds and runs a test in a module of its own, outside this repository, as
// one of dlock's users would: it needs nothing of dlock's but its public packages, and
// its module graph holds nothing of dlock's beyond go-redis, miniredis and the small test
// dependencies (checkGraph).
func TestAsAUser(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a module of its own: not with -short")
	}
	t.Parallel()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	write(t, filepath.Join(dir, "go.mod"), strings.Replace(userGoMod, "%s", root, 1))
	write(t, filepath.Join(dir, "checkout_test.go"), userTest)

	goCmd(t, dir, "mod", "tidy")
	checkGraph(t, dir)
	// With -race when this test has it: the packages it shares with this test binary are
	// then built already.
	args := []string{"test", "-count=1"}
	if raceEnabled {
		args = append(args, "-race")
	}
	goCmd(t, dir, append(args, ".")...)
}

func write(t *testing.T, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// goCmd runs the go command in dir, outside any workspace, free to update go.mod, and
// returns its output; it fails the test if the command fails. It builds one package at a
// time (-p=1), so as not to starve the timing of the tests that run beside it.
func goCmd(t *testing.T, dir string, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), userTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS="+strings.TrimSpace(os.Getenv("GOFLAGS")+" -mod=mod -p=1"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}
