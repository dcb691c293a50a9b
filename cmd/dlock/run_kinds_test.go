package main

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestRunKindUsageErrors: the flags that choose the kind of lock exclude each other, and
// a Semaphore's permits are checked, before any server is contacted.
func TestRunKindUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		flags []string
		want  string
	}{
		{[]string{"--shared", "--permits", "2", "--size", "3"}, "--shared and --permits exclude each other"},
		{[]string{"-s", "--fair"}, "--shared and --fair exclude each other"},
		{[]string{"--exclusive", "--shared"}, "--shared and --exclusive exclude each other"},
		{[]string{"-x", "--size", "2", "--fair"}, "--exclusive, --size and --fair exclude each other"},
		{[]string{"--permits", "2"}, "--permits needs --size"},
		{[]string{"--permits", "3", "--size", "2"}, "--permits 3: take from 1 to --size (2)"},
		{[]string{"--permits", "0", "--size", "2"}, "--permits 0: take from 1"},
		{[]string{"--permits=x", "--size", "2"}, `invalid argument "x" for "--permits" flag`},
	} {
		args := append(append([]string{"run"}, tt.flags...), "job", "--", "true")
		t.Run(strings.Join(tt.flags, " "), func(t *testing.T) {
			t.Parallel()
			expectUsage(t, args, tt.want)
		})
	}
}

// gates hold commands run by dlock until the test lets them go: each says it is in by
// creating a file, and exits when the test creates another.
type gates struct {
	t   *testing.T
	dir string
}

func newGates(t *testing.T) gates { return gates{t: t, dir: t.TempDir()} }

// command is a command for dlock run that enters gate id and waits there.
func (g gates) command(id string) []string {
	in, out := filepath.Join(g.dir, "in-"+id), filepath.Join(g.dir, "go-"+id)
	return []string{"sh", "-c", `touch "$1"; while [ ! -e "$2" ]; do sleep 0.02; done; echo "left $3"`, "sh", in, out, id}
}

// in reports whether the command of gate id has entered it.
func (g gates) in(id string) bool {
	_, err := os.Stat(filepath.Join(g.dir, "in-"+id))
	return err == nil
}

// open lets the command of gate id go.
func (g gates) open(id string) {
	if err := os.WriteFile(filepath.Join(g.dir, "go-"+id), nil, 0o644); err != nil {
		g.t.Fatal(err)
	}
}

// runGated starts 'dlock run ARGS NAME -- (gate id)' and waits until its command is in.
func (g gates) runGated(env []string, id, name string, args ...string) *proc {
	g.t.Helper()
	p := startDlock(g.t, env, append(append(append([]string{"run"}, args...), name, "--"), g.command(id)...)...)
	waitFor(g.t, 15*time.Second, "the command of "+id+" to run under the lock", func() bool { return g.in(id) })
	return p
}

// TestRunShared: --shared holders run at once; a writer (--exclusive, or the library's
// RWMutex writer) is kept out, exit 75, and a waiting one runs once the readers are gone.
func TestRunShared(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	env := []string{"DLOCK_REDIS=" + serverURL(srv)}
	g := newGates(t)
	r1 := g.runGated(env, "r1", "config", "--shared")
	r2 := g.runGated(env, "r2", "config", "-s", "-t", "20s")
	if info := lockStatus(t, env, "config"); info.Kind != kindRW || !eq(info.Readers, 2) || info.Mode != "read" {
		t.Fatalf("want two readers holding config at once; status: %+v", info)
	}

	// A Mutex of the same name does not wait for readers ('dlock help run' says so).
	expect(t, runBin(t, env, "run", "config", "--", "true"), 0)
	r := runBin(t, env, "run", "--exclusive", "config", "--", "echo", "wrote")
	expect(t, r, exitNotAcquired, `the lock "config" is held by readers or a writer`, "--wait 0: one attempt")
	lib := newLib(t, srv.Client(t))
	if _, err := lib.c.RWMutex("config").TryLock(lib.ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("the library's writer: want ErrNotAcquired while readers hold; got %v", err)
	}

	writer := startDlock(t, env, "run", "-x", "-w", "30s", "config", "--", "echo", "wrote")
	waitFor(t, 10*time.Second, "the writer to wait", func() bool {
		n, _ := srv.Client(t).ZCard(context.Background(), "{dlock:config}:writers").Result()
		return n == 1
	})
	// A reader that comes now waits behind the writer: readers cannot starve it.
	r = runBin(t, env, "run", "--shared", "config", "--", "true")
	expect(t, r, exitNotAcquired, "a writer waits for it")
	g.open("r1")
	expect(t, r1.wait(), 0, "left r1")
	select {
	case <-writer.done:
		t.Fatalf("the writer ran while a reader held the lock: %v", writer.wait())
	case <-time.After(200 * time.Millisecond):
	}
	g.open("r2")
	expect(t, r2.wait(), 0, "left r2")
	expect(t, writer.wait(), 0, "wrote")
}

// TestRunPermits: --permits N --size M holds N permits of M; holders run at once while
// permits remain, then one more is refused (75), and waits for permits to come back.
func TestRunPermits(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	env := []string{"DLOCK_REDIS=" + serverURL(srv)}
	g := newGates(t)
	a := g.runGated(env, "a", "encoder", "--permits", "2", "--size", "3")
	b := g.runGated(env, "b", "encoder", "--size", "3") // one permit
	if info := lockStatus(t, env, "encoder"); info.Kind != kindSemaphore || !eq(info.PermitsInUse, 3) || !eq(info.Holders, 2) {
		t.Fatalf("want 3 permits in use by 2 holders; status: %+v", info)
	}
	r := runBin(t, env, "run", "--permits", "1", "--size", "3", "encoder", "--", "true")
	expect(t, r, exitNotAcquired, `the Semaphore "encoder" has fewer than 1 of its 3 permits free`)

	c := startDlock(t, env, "run", "--permits=1", "--size=3", "-w", "30s", "encoder", "--", "echo", "encoded")
	waitFor(t, 10*time.Second, "the third holder to queue", func() bool { return lockStatus(t, env, "encoder").Waiters == 1 })
	g.open("b")
	expect(t, b.wait(), 0, "left b")
	expect(t, c.wait(), 0, "encoded")
	g.open("a")
	expect(t, a.wait(), 0, "left a")
	if keyExists(srv.Client(t), "dlock:encoder") {
		t.Fatal("permits are still held after every holder exited")
	}
}
