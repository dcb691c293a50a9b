package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/engine"
	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// serverURL is the URL of a test server without a password.
func serverURL(s *redistest.Server) string { return "redis://" + s.Addr }

// keyExists reports whether key exists on rdb.
func keyExists(rdb redis.Cmdable, key string) bool {
	n, err := rdb.Exists(context.Background(), key).Result()
	return err == nil && n == 1
}

// keysOf returns the Redis names of the lock called name under the command's default
// prefix. Tests ask internal/keyspace, which owns the key layout, rather than spelling keys
// by hand, so that a change of layout is made once and the tests follow it. It panics on a
// name that has no keys: a test's own names are constants.
func keysOf(name string) keyspace.Keys {
	k, err := keyspace.For(engine.DefaultPrefix, name)
	if err != nil {
		panic(err)
	}
	return k
}

func TestRunExitCodes(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	notExec := filepath.Join(t.TempDir(), "not-executable")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\nexit 0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		command []string
		code    int
		want    string
	}{
		{"exit code passes through", []string{"sh", "-c", "exit 7"}, 7, ""},
		{"success", []string{"true"}, 0, ""},
		{"killed by a signal", []string{"sh", "-c", "kill -KILL $$"}, 128 + 9, ""},
		{"not found", []string{"dlock-test-no-such-command"}, exitNotFound, "command not found"},
		{"not executable", []string{notExec}, exitCannotExec, "permission denied"},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			name := "exit-" + strconv.Itoa(i)
			r := runBin(t, nil, append([]string{"run", "--redis", serverURL(srv), name, "--"}, tt.command...)...)
			expect(t, r, tt.code, tt.want)
			if keyExists(srv.Client(t), keysOf(name).Lock) {
				t.Fatalf("the lock is still held after dlock exited")
			}
		})
	}
}

func TestRunEnvironment(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	var last uint64
	for range 2 {
		r := runBin(t, []string{"DLOCK_REDIS=" + serverURL(srv), "DLOCK_TOKEN=stale"}, "run", "report", "--", "sh", "-c", `echo "name=$DLOCK_NAME token=$DLOCK_TOKEN"`)
		expect(t, r, 0, "name=report token=")
		m := regexp.MustCompile(`token=(\d+)`).FindStringSubmatch(r.stdout)
		if m == nil {
			t.Fatalf("no numeric DLOCK_TOKEN: %v", r)
		}
		tok, _ := strconv.ParseUint(m[1], 10, 64)
		if tok <= last {
			t.Fatalf("token %d does not grow (previous %d)", tok, last)
		}
		last = tok
		if fence, _ := rdb.Get(context.Background(), "{dlock:report}:fence").Uint64(); fence != tok {
			t.Fatalf("fencing counter %d, DLOCK_TOKEN %d", fence, tok)
		}
	}
	if keyExists(rdb, "dlock:report") {
		t.Fatal("the lock is still held after dlock exited")
	}
}

// TestRunHeld: a lock held by another process is exit 75 with the holder's remaining
// time, at once or after --wait; a waiter wakes when the holder exits; a signal ends a wait.
func TestRunHeld(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	env := []string{"DLOCK_REDIS=" + serverURL(srv)}
	holder := startDlock(t, env, "run", "--ttl", "20s", "busy", "--", "sleep", "30")
	waitFor(t, 10*time.Second, "the holder to take the lock", func() bool { return keyExists(rdb, "dlock:busy") })

	r := runBin(t, env, "run", "busy", "--", "true")
	expect(t, r, exitNotAcquired, `the lock "busy" is held by another process`, "--wait")
	if !regexp.MustCompile(`lease has \d+(\.\d+)?m?s left`).MatchString(r.stderr) {
		t.Fatalf("the message does not name the holder's remaining time: %v", r)
	}
	r = runBin(t, env, "run", "--wait", "300ms", "busy", "--", "true")
	expect(t, r, exitNotAcquired, "within --wait 300ms", "left")
	if r.elapsed < 300*time.Millisecond {
		t.Fatalf("gave up after %v, before --wait 300ms", r.elapsed)
	}

	// A waiter interrupted by a signal exits 128+N and runs nothing.
	waiter := startDlock(t, env, "run", "--wait", "forever", "busy", "--", "echo", "ran")
	waitFor(t, 10*time.Second, "the waiter to subscribe", func() bool { return numSub(rdb, "{dlock:busy}:released") >= 1 })
	_ = waiter.cmd.Process.Signal(syscall.SIGINT)
	r = waiter.wait()
	expect(t, r, 128+int(syscall.SIGINT), "interrupted while waiting")
	if strings.Contains(r.stdout, "ran") {
		t.Fatalf("the command ran after an interrupted wait: %v", r)
	}

	// A waiter wakes as soon as the holder exits.
	waiter = startDlock(t, env, "run", "--wait", "60s", "busy", "--", "echo", "ran")
	waitFor(t, 10*time.Second, "the waiter to subscribe", func() bool { return numSub(rdb, "{dlock:busy}:released") >= 1 })
	_ = holder.cmd.Process.Signal(syscall.SIGTERM) // forwarded to sleep, which dies of it
	expect(t, holder.wait(), 128+int(syscall.SIGTERM))
	r = waiter.wait()
	expect(t, r, 0, "ran")
}

// numSub is PUBSUB NUMSUB of channel.
func numSub(rdb *redis.Client, channel string) int64 {
	m, err := rdb.PubSubNumSub(context.Background(), channel).Result()
	if err != nil {
		return 0
	}
	return m[channel]
}

// TestRunLockLost: when the lock is lost under it, the command is stopped (SIGTERM, then
// SIGKILL after --grace, for the whole process group) and dlock exits 70.
func TestRunLockLost(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		command []string
	}{
		{"stops on SIGTERM", []string{"sleep", "30"}},
		{"ignores SIGTERM", []string{"sh", "-c", "trap '' TERM; sleep 30; echo survived"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			rdb := srv.Client(t)
			p := startDlock(t, nil, append([]string{"run", "--redis", serverURL(srv), "--ttl", "2s", "--grace", "300ms", "job", "--"}, tt.command...)...)
			waitFor(t, 10*time.Second, "the lock to be taken", func() bool { return keyExists(rdb, "dlock:job") })
			time.Sleep(100 * time.Millisecond) // let the command start
			if err := rdb.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			r := p.wait()
			expect(t, r, exitLost, `lost the lock "job" while the command ran`, "SIGKILL in 300ms", "work may have overlapped")
			if strings.Contains(r.stdout, "survived") {
				t.Fatalf("the command survived: %v", r)
			}
			if r.elapsed > 20*time.Second {
				t.Fatalf("took %v to stop the command", r.elapsed)
			}
		})
	}
}

// TestRunForwardsSignals: a signal sent to dlock reaches the command, whose exit code
// dlock returns.
func TestRunForwardsSignals(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP} {
		t.Run(sig.String(), func(t *testing.T) {
			t.Parallel()
			mark := filepath.Join(t.TempDir(), "trapped")
			name := "sig-" + strconv.Itoa(int(sig))
			p := startDlock(t, nil, "run", "--redis", serverURL(srv), name, "--",
				"sh", "-c", `trap 'exit 3' TERM INT HUP; touch "$0"; while :; do sleep 0.05; done`, mark)
			waitFor(t, 10*time.Second, "the command to set its trap", func() bool { return fileExistsAt(mark) })
			_ = p.cmd.Process.Signal(sig)
			expect(t, p.wait(), 3)
			if keyExists(srv.Client(t), keysOf(name).Lock) {
				t.Fatal("the lock is still held after dlock exited")
			}
		})
	}
}

func fileExistsAt(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}

// TestRunQuorum: with several --redis, the lock is a Redlock quorum; it goes on with a
// server down, and says so.
func TestRunQuorum(t *testing.T) {
	t.Parallel()
	nodes := redistest.StartNodes(t, 3)
	args := []string{"run"}
	for _, n := range nodes {
		args = append(args, "--redis", serverURL(n))
	}
	r := runBin(t, nil, append(args, "q", "--", "sh", "-c", "echo token=$DLOCK_TOKEN")...)
	expect(t, r, 0, "token=")
	nodes[2].Kill(t)
	r = runBin(t, nil, append(args, "q", "--", "sh", "-c", "echo token=$DLOCK_TOKEN")...)
	expect(t, r, 0, "token=", "1 of 3 servers cannot be used", nodes[2].Addr)
}

// TestRunProcessGroup: the command leads its own process group, unless --foreground keeps
// it in dlock's; signals are forwarded either way.
func TestRunProcessGroup(t *testing.T) {
	t.Parallel()
	if !fileExistsAt("/proc/self/stat") {
		t.Skip("needs /proc to read process groups")
	}
	srv := redistest.Start(t)
	// Prints the command's pid and process group, and its parent's (dlock's) group.
	const show = `set -- $(cat /proc/$$/stat); echo "pid=$$ pgrp=$5 parent=$(cut -d' ' -f5 /proc/$PPID/stat)"`
	r := runBin(t, nil, "run", "--redis", serverURL(srv), "pg", "--", "sh", "-c", show)
	expect(t, r, 0)
	var pid, pgrp, parent int
	if _, err := fmt.Sscanf(r.stdout, "pid=%d pgrp=%d parent=%d", &pid, &pgrp, &parent); err != nil {
		t.Fatalf("%v: %v", err, r)
	}
	if pgrp != pid || parent == pgrp {
		t.Fatalf("the command is not in a process group of its own: %v", r)
	}
	r = runBin(t, nil, "run", "--redis", serverURL(srv), "--foreground", "pg", "--", "sh", "-c", show)
	expect(t, r, 0)
	if _, err := fmt.Sscanf(r.stdout, "pid=%d pgrp=%d parent=%d", &pid, &pgrp, &parent); err != nil {
		t.Fatalf("%v: %v", err, r)
	}
	if parent != pgrp {
		t.Fatalf("--foreground: the command is not in dlock's process group: %v", r)
	}

	mark := filepath.Join(t.TempDir(), "trapped")
	p := startDlock(t, nil, "run", "--redis", serverURL(srv), "--foreground", "pg", "--",
		"sh", "-c", `trap 'exit 4' TERM; touch "$0"; while :; do sleep 0.05; done`, mark)
	waitFor(t, 10*time.Second, "the command to set its trap", func() bool { return fileExistsAt(mark) })
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	expect(t, p.wait(), 4)
}

// TestRunFair: --fair takes a FairMutex: exit 75 when held, and a waiter gets it when the
// holder exits.
func TestRunFair(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	env := []string{"DLOCK_REDIS=" + serverURL(srv)}
	holder := startDlock(t, env, "run", "--fair", "fair-job", "--", "sleep", "30")
	waitFor(t, 10*time.Second, "the holder to take the lock", func() bool { return keyExists(rdb, "dlock:fair-job") })
	expect(t, runBin(t, env, "run", "--fair", "fair-job", "--", "true"), exitNotAcquired, "held by another process", "left")
	waiter := startDlock(t, env, "run", "--fair", "--wait", "60s", "fair-job", "--", "sh", "-c", "echo token=$DLOCK_TOKEN")
	waitFor(t, 10*time.Second, "the waiter to queue", func() bool {
		n, _ := rdb.LLen(context.Background(), "{dlock:fair-job}:queue").Result()
		return n >= 1
	})
	_ = holder.cmd.Process.Signal(syscall.SIGTERM)
	expect(t, holder.wait(), 128+int(syscall.SIGTERM))
	expect(t, waiter.wait(), 0, "token=2")
}
