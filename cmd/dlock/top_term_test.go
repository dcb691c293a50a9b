package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// The terminal tests run 'dlock top' in tmux, a real terminal: send-keys types, and
// capture-pane reads the screen.

// tmuxTimeout bounds each wait for the screen, and each tmux command.
const tmuxTimeout = 15 * time.Second

// shellBeforeTop is what the pane shows before top starts: the screen that must be back
// once top exits.
const shellBeforeTop = "the shell before dlock top"

// tmuxServer is a tmux server of the test's own, killed at its cleanup. Its panes stay
// after their command exits (remain-on-exit), to be read with its exit status.
type tmuxServer struct {
	t      *testing.T
	socket string
	conf   string
	env    []string
}

func startTmux(t *testing.T, env []string) *tmuxServer {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("tmux is not installed, and the terminal tests of 'dlock top' need it: apt-get install tmux (or make deps)")
	}
	// A server per test, or one test's kill-server would end the other's.
	socket := fmt.Sprintf("dlock-%d-%s", os.Getpid(), strings.Map(func(r rune) rune {
		if r == '/' || r == ' ' {
			return '-'
		}
		return r
	}, t.Name()))
	tm := &tmuxServer{t: t, socket: socket, conf: filepath.Join(t.TempDir(), "tmux.conf"), env: testEnv(env)}
	if err := os.WriteFile(tm.conf, []byte("set -g remain-on-exit on\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = tm.tmux("kill-server") })
	return tm
}

// tmux runs a tmux command on the test's server.
func (tm *tmuxServer) tmux(args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), tmuxTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, "tmux", append([]string{"-L", tm.socket, "-f", tm.conf}, args...)...)
	cmd.Env = tm.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("tmux %v: %v: %s", args, err, out)
	}
	return string(out), nil
}

func (tm *tmuxServer) must(args ...string) string {
	tm.t.Helper()
	out, err := tm.tmux(args...)
	if err != nil {
		tm.t.Fatal(err)
	}
	return out
}

// openTop opens a session of width×height whose pane prints shellBeforeTop, runs dlock
// with args, and says how it exited. The shell ignores SIGTERM, so that the test can send
// it to the pane's process group and reach dlock alone.
func (tm *tmuxServer) openTop(session string, width, height int, args ...string) {
	tm.t.Helper()
	script := filepath.Join(tm.t.TempDir(), "top.sh")
	quoted := []string{shellQuote(dlockBin)}
	for _, a := range args {
		quoted = append(quoted, shellQuote(a))
	}
	text := "#!/bin/sh\necho '" + shellBeforeTop + "'\ntrap '' TERM\n" + strings.Join(quoted, " ") + "\necho \"dlock exited $?\"\n"
	if err := os.WriteFile(script, []byte(text), 0o755); err != nil {
		tm.t.Fatal(err)
	}
	tm.must("new-session", "-d", "-s", session, "-x", strconv.Itoa(width), "-y", strconv.Itoa(height), script)
}

// screen is what the pane shows.
func (tm *tmuxServer) screen(session string) string {
	tm.t.Helper()
	return tm.must("capture-pane", "-p", "-t", session)
}

// await waits until cond holds of the screen, and returns it.
func (tm *tmuxServer) await(session, what string, cond func(screen string) bool) string {
	tm.t.Helper()
	deadline := time.Now().Add(tmuxTimeout)
	for {
		s := tm.screen(session)
		if cond(s) {
			return s
		}
		if time.Now().After(deadline) {
			tm.t.Fatalf("timed out after %v waiting for %s; the screen:\n%s", tmuxTimeout, what, s)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// pane reads a format of the pane, such as #{pane_dead}.
func (tm *tmuxServer) pane(session, format string) string {
	tm.t.Helper()
	return strings.TrimSpace(tm.must("display-message", "-p", "-t", session, format))
}

// awaitExit waits for dlock to exit, and checks that it exited 0 and left the alternate
// screen: the screen from before it is back, without its view. (The history is read too:
// tmux's "Pane is dead" line may scroll the first line into it.)
func (tm *tmuxServer) awaitExit(session string) {
	tm.t.Helper()
	var s string
	waitFor(tm.t, tmuxTimeout, "dlock top to exit in "+session, func() bool {
		s = tm.must("capture-pane", "-p", "-S", "-", "-t", session)
		return strings.Contains(s, "dlock exited")
	})
	if !strings.Contains(s, "dlock exited 0") || !strings.Contains(s, shellBeforeTop) || strings.Contains(s, "NAME") ||
		tm.pane(session, "#{alternate_on}") != "0" {
		tm.t.Fatalf("want dlock to exit 0 and the terminal restored; the screen:\n%s", s)
	}
}

// shellQuote quotes s for sh.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// rowsAre reports whether the screen's table lists names, in that order.
func rowsAre(names ...string) func(string) bool {
	return func(s string) bool {
		table, ok := parseTop(s)
		return ok && slices.Equal(table.names, names)
	}
}

// TestTopTerminal: top in a terminal shows the locks in order, follows as waiters come and
// a lock expires, shows an error while the server is gone and recovers, and on q leaves
// the terminal as it found it.
func TestTopTerminal(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	holders, waiters := newLib(t, rdb), newLib(t, rdb)
	holders.now(holders.c.FairMutex("hot", dlock.TTL(30*time.Second)).Lock)
	waiters.lock(waiters.c.FairMutex("hot", dlock.TTL(30*time.Second)).Lock)
	waitLen(t, rdb, "{dlock:hot}:queue", 1)
	calm := holders.c.FairMutex("calm", dlock.TTL(40*time.Second))
	holders.now(calm.Lock)
	rdb.Set(context.Background(), "dlock:short", "tok-short", 6*time.Second)

	tm := startTmux(t, []string{"DLOCK_REDIS=" + serverURL(srv)})
	tm.openTop("top", 120, 30, "top", "--interval", "200ms")
	s := tm.await("top", "hot, short, calm", rowsAre("hot", "short", "calm"))
	if !strings.Contains(s, "dlock top: "+srv.Addr) || !strings.Contains(s, "3 locks") || tm.pane("top", "#{alternate_on}") != "1" {
		t.Fatalf("want the header on the alternate screen; the screen:\n%s", s)
	}

	for range 2 {
		waiters.lock(calm.Lock)
	}
	tm.await("top", "calm first, with 2 waiters", func(s string) bool {
		table, _ := parseTop(s)
		return len(table.names) > 0 && table.names[0] == "calm" && table.cell("calm", "WAITERS") == "2"
	})
	tm.await("top", "short to expire", rowsAre("calm", "hot"))

	srv.Kill(t)
	tm.await("top", "the error of a server gone", func(s string) bool {
		return strings.Contains(s, "refresh failed") && strings.Contains(s, "connection refused") && strings.Contains(s, "calm")
	})
	srv.Restart(t)
	tm.await("top", "the view to recover", func(s string) bool {
		return !strings.Contains(s, "refresh failed") && (strings.Contains(s, "NAME") || strings.Contains(s, "no locks match"))
	})

	tm.must("send-keys", "-t", "top", "q")
	tm.awaitExit("top")
}

// TestTopTerminalQuits: Ctrl-C, q and SIGTERM end top and restore the terminal; a
// terminal too small for the table shows what fits and counts the rest.
func TestTopTerminalQuits(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	for i := range 8 {
		rdb.Set(context.Background(), fmt.Sprintf("dlock:a-lock-with-a-long-name-%d", i), "0123456789abcdef0123456789abcdef", time.Minute)
	}
	tm := startTmux(t, []string{"DLOCK_REDIS=" + serverURL(srv)})
	quits := []struct {
		name string
		quit func(session string)
	}{
		{"q", func(session string) { tm.must("send-keys", "-t", session, "q") }},
		{"ctrl-c", func(session string) { tm.must("send-keys", "-t", session, "C-c") }},
		{"sigterm", func(session string) {
			pgid, err := strconv.Atoi(tm.pane(session, "#{pane_pid}"))
			if err != nil {
				t.Fatal(err)
			}
			if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, q := range quits {
		tm.openTop(q.name, 60, 6, "top")
		s := tm.await(q.name, "the view, cut to fit", func(s string) bool { return strings.Contains(s, "+5 more") })
		// A line longer than the terminal would wrap, and push the others down.
		lines := strings.Split(s, "\n")
		if !strings.HasPrefix(lines[0], "dlock top: ") || !strings.HasPrefix(lines[1], "NAME ") || lines[5] != "+5 more" {
			t.Fatalf("want the header, the table's header, 3 rows and +5 more; the screen:\n%s", s)
		}
		if name := strings.Fields(lines[2])[0]; !strings.HasPrefix(name, "a-lo") || !strings.Contains(name, "…") ||
			!strings.Contains(name, "-name-") && !strings.Contains(name, "…name-") || !strings.Contains(lines[2], "0123456…") {
			t.Fatalf("want the long names and tokens shortened; the screen:\n%s", s)
		}
		q.quit(q.name)
		tm.awaitExit(q.name)
	}
}

// TestTopTerminalWideNames: names of CJK characters (two columns each) and with a
// combining accent (none) line up in the terminal, and a terminal too narrow for them
// cuts them by the columns they take: no line wraps.
func TestTopTerminalWideNames(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	var names []string
	for i, n := range wideNames { // in top's order: the hold that ends soonest first
		rdb.Set(context.Background(), keysOf(n.name).Lock, "tok", time.Duration(50+i)*time.Second)
		names = append(names, n.name)
	}
	// A UTF-8 locale for tmux, whatever the test's.
	tm := startTmux(t, []string{"DLOCK_REDIS=" + serverURL(srv), "LC_ALL=C.UTF-8"})

	tm.openTop("wide", 120, 12, "top")
	s := tm.await("wide", "the wide names", rowsAre(names...))
	lines := strings.Split(s, "\n")
	kindAt := strings.Index(lines[1], "KIND")
	if !strings.HasPrefix(lines[1], "NAME ") || kindAt != wideNames[0].width+2 {
		t.Fatalf("want KIND after the widest name (%d columns) and 2 spaces; the screen:\n%s", wideNames[0].width, s)
	}
	for i, n := range wideNames {
		if want := n.name + strings.Repeat(" ", kindAt-n.width) + "mutex  tok"; !strings.HasPrefix(lines[2+i], want) {
			t.Errorf("row %d: %q, want it to start %q", i, lines[2+i], want)
		}
	}
	tm.must("send-keys", "-t", "wide", "q")
	tm.awaitExit("wide")

	// 40 columns: NAME gives up its width, then every line is cut at the edge.
	tm.openTop("narrow", 40, 12, "top")
	s = tm.await("narrow", "the rows, cut", func(s string) bool { return strings.Contains(s, "日本…ロック") })
	lines = strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) != 2+len(wideNames) {
		t.Fatalf("want the header, the table's header and %d rows, none wrapped; the screen:\n%s", len(wideNames), s)
	}
	for i, l := range lines[2:] {
		if !strings.Contains(l, " mutex ") || !strings.HasSuffix(l, "…") {
			t.Errorf("row %d: %q, want it cut at the edge after KIND", i, l)
		}
	}
	tm.must("send-keys", "-t", "narrow", "q")
	tm.awaitExit("narrow")
}
