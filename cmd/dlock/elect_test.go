package main

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// leaderJSON runs 'dlock leader --json NAME' and decodes it, with its exit code.
func leaderJSON(t *testing.T, env []string, name string) (leaderInfo, int) {
	t.Helper()
	r := runBin(t, env, "leader", "--json", name)
	var in leaderInfo
	if err := json.Unmarshal([]byte(r.stdout), &in); err != nil {
		t.Fatalf("not JSON: %v\n%v", err, r)
	}
	return in, r.code
}

// TestElect: 'dlock run --elect' leads while its command runs and a second candidate is
// refused (75) with --wait 0 and leads after it with --wait; 'dlock leader' reads each
// term (3 with no leader) and 'dlock observe' prints each change until SIGINT (exit 0).
func TestElect(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	env := []string{"DLOCK_REDIS=" + serverURL(srv)}
	expect(t, runBin(t, env, "leader", "sched"), exitNoLeader, "sched: no leader")
	if in, code := leaderJSON(t, env, "sched"); code != exitNoLeader || in.Leading || in.Name != "sched" {
		t.Fatalf("leader --json with no leader: %+v, exit %d", in, code)
	}
	observe := startDlock(t, env, "observe", "--json", "sched")
	first := startDlock(t, env, "run", "--elect", "--value", "host-a:8080", "sched", "--", "sh", "-c", "echo term $DLOCK_TOKEN; sleep 2")
	waitFor(t, 10*time.Second, "the first term", func() bool { in, _ := leaderJSON(t, env, "sched"); return in.Leading })
	in, code := leaderJSON(t, env, "sched")
	if code != 0 || in.Value != "host-a:8080" || in.Token != 1 || in.Owner == "" || in.Since == "" {
		t.Fatalf("leader --json: %+v, exit %d", in, code)
	}
	expect(t, runBin(t, env, "leader", "sched"), 0, `sched: "host-a:8080" (term 1, owner `)
	expect(t, runBin(t, env, "run", "--elect", "--value", "b", "sched", "--", "true"), exitNotAcquired, `the election "sched" has another leader`)
	second := startDlock(t, env, "run", "--elect", "--value", "host-b:8080", "--wait", "30s", "sched", "--", "sh", "-c", "echo term $DLOCK_TOKEN")
	expect(t, first.wait(), 0, "term 1")
	expect(t, second.wait(), 0, "term 2")
	waitFor(t, 10*time.Second, "observe to print the second term and its end", func() bool {
		out := observe.stdout.String()
		return strings.Contains(out, `"value":"host-b:8080"`) && strings.HasSuffix(strings.TrimSpace(out), `"leading":false,"value":"","token":0}`)
	})
	_ = observe.cmd.Process.Signal(syscall.SIGINT)
	r := observe.wait()
	expect(t, r, 0, `"value":"host-a:8080","token":1`)
	lines := strings.Split(strings.TrimSpace(r.stdout), "\n")
	var got []string
	for _, l := range lines {
		var in leaderInfo
		if err := json.Unmarshal([]byte(l), &in); err != nil || in.Time == "" {
			t.Fatalf("observe printed %q: %v", l, err)
		}
		got = append(got, in.text())
	}
	t.Logf("observe saw:\n%s", strings.Join(got, "\n"))
}

// TestObserveLines: plain 'dlock observe NAME' prints one line per change of leader, each
// the time it was seen and what it saw: no leader, then a term a library Client campaigned
// for (its quoted value, token, owner and start), then no leader once it resigned; SIGINT
// ends it with exit 0.
func TestObserveLines(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	ctx, cancel := context.WithTimeout(context.Background(), runTimeout)
	defer cancel()
	c := dlock.New(srv.Client(t), dlock.WithOwner("observe-test"))
	defer c.Close()
	observe := startDlock(t, []string{"DLOCK_REDIS=" + serverURL(srv)}, "observe", "sched")
	observed(t, observe, "no leader")
	term, err := c.Election("sched").Campaign(ctx, "v1")
	if err != nil {
		t.Fatal(err)
	}
	l, err := c.Election("sched").Leader(ctx)
	if err != nil {
		t.Fatal(err)
	}
	leading := fmt.Sprintf(`"v1" (term %d, owner "observe-test", since %s)`, term.Token(), l.Since.UTC().Format(time.RFC3339Nano))
	observed(t, observe, "no leader", leading)
	if err := term.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	observed(t, observe, "no leader", leading, "no leader")
	_ = observe.cmd.Process.Signal(syscall.SIGINT)
	expect(t, observe.wait(), 0)
}

// observed waits until a plain 'dlock observe' has printed exactly want, one line each,
// and fails the test unless each line starts with an RFC 3339 time.
func observed(t *testing.T, observe *proc, want ...string) {
	t.Helper()
	var got []string
	deadline := time.Now().Add(10 * time.Second)
	for len(got) < len(want) && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
		got = completeLines(observe.stdout.String())
	}
	for i, line := range got {
		when, text, ok := strings.Cut(line, "  ")
		if _, err := time.Parse(time.RFC3339Nano, when); !ok || err != nil || i >= len(want) || text != want[i] {
			t.Fatalf("observe printed line %d %q; want a time, two spaces and %q of:\n%s", i+1, line, want, strings.Join(want, "\n"))
		}
	}
	if len(got) < len(want) {
		t.Fatalf("observe printed %q; want %d lines ending %q", got, len(want), want[len(want)-1])
	}
}

// completeLines are the lines of out: a line not ended yet is left out.
func completeLines(out string) []string {
	end := strings.LastIndexByte(out, '\n')
	if end < 0 {
		return nil
	}
	return strings.Split(out[:end], "\n")
}

// TestElectUsage: --value needs --elect, --elect excludes the other kinds, and leader and
// observe take one name.
func TestElectUsage(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{
		{"run", "--value", "v", "x", "--", "true"},
		{"run", "--elect", "--shared", "x", "--", "true"},
		{"run", "--elect", "--permits", "1", "--size", "2", "x", "--", "true"},
		{"run", "--elect", "--fair", "x", "--", "true"},
		{"run", "--elect", "--value", strings.Repeat("v", 64<<10+1), "x", "--", "true"},
		{"leader"},
		{"leader", "a", "b"},
		{"observe"},
	} {
		r := runBin(t, []string{"DLOCK_REDIS=redis://127.0.0.1:1"}, args...)
		if r.code != exitUsage {
			t.Errorf("dlock %.60q: want exit 2; got %v", args, r)
		}
	}
}
