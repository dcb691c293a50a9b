package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// statusJSON runs status or list with --json and decodes it.
func statusJSON(t *testing.T, env []string, args ...string) []lockInfo {
	t.Helper()
	r := runBin(t, env, append(args, "--json")...)
	expect(t, r, 0)
	var infos []lockInfo
	if err := json.Unmarshal([]byte(r.stdout), &infos); err != nil {
		t.Fatalf("not JSON: %v\n%v", err, r)
	}
	return infos
}

func names(infos []lockInfo) []string {
	var out []string
	for _, in := range infos {
		out = append(out, in.Name)
	}
	return out
}

// TestStatusListUnlock walks through an operator's session: a lock held by one process and
// waited for by another; status and list show them; unlock --force removes the holder,
// the waiter gets the lock at once with a larger token, and the old holder stops.
func TestStatusListUnlock(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	env := []string{"DLOCK_REDIS=" + serverURL(srv)}

	holder := startDlock(t, env, "run", "--ttl", "3s", "orders:42", "--", "sleep", "30")
	waitFor(t, 10*time.Second, "the holder", func() bool { return keyExists(rdb, "dlock:orders:42") })
	waiter := startDlock(t, env, "run", "--wait", "60s", "orders:42", "--", "sh", "-c", "echo acquired $DLOCK_TOKEN")
	waitFor(t, 10*time.Second, "the waiter to subscribe", func() bool { return numSub(rdb, "{dlock:orders:42}:released") >= 1 })
	token, _ := rdb.Get(ctx, "dlock:orders:42").Result()
	fence, _ := rdb.Get(ctx, "{dlock:orders:42}:fence").Uint64()
	// Other keys under the prefix: a lock held by some other client, and a foreign key.
	rdb.Set(ctx, "dlock:cron:a", "tok-a", time.Minute)
	rdb.HSet(ctx, "dlock:weird", "f", "v")

	// status, as text and JSON.
	r := runBin(t, env, "status", "orders:42", "free-one")
	expect(t, r, 0, "NAME", "HOLDER", "WAITERS", "orders:42", "mutex", token, strconv.FormatUint(fence, 10), "free-one")
	infos := statusJSON(t, env, "status", "orders:42", "free-one")
	if len(infos) != 2 {
		t.Fatalf("want 2 locks, got %+v", infos)
	}
	held, free := infos[0], infos[1]
	if !held.Held || held.Kind != "mutex" || held.Holder != token || held.Fence != fence || held.Key != "dlock:orders:42" ||
		held.TTLms == nil || *held.TTLms <= 0 || *held.TTLms > 3000 || held.Waiters < 1 {
		t.Fatalf("held lock: %+v (ttl %v), want holder %s, fence %d, 0 < ttl <= 3000, waiters >= 1", held, held.TTLms, token, fence)
	}
	// The owner: the holding dlock run's host and process id, by default.
	if host, _ := os.Hostname(); held.Owner != fmt.Sprintf("%s:%d", host, holder.cmd.Process.Pid) {
		t.Fatalf("held lock's owner %q, want the holder's host:pid", held.Owner)
	}
	if free.Held || free.Kind != "" || free.Holder != "" || free.TTLms != nil || free.Waiters != 0 {
		t.Fatalf("free lock: %+v", free)
	}

	// list: every lock under the prefix, without the fencing counters; a pattern narrows it.
	infos = statusJSON(t, env, "list")
	if got := names(infos); !slices.Equal(got, []string{"cron:a", "orders:42", "weird"}) {
		t.Fatalf("list: %q", got)
	}
	if infos[2].Kind != "hash" {
		t.Fatalf("a hash under the prefix shows as %q", infos[2].Kind)
	}
	if got := names(statusJSON(t, env, "list", "cron:*")); !slices.Equal(got, []string{"cron:a"}) {
		t.Fatalf("list cron:*: %q", got)
	}
	expect(t, runBin(t, env, "list"), 0, "orders:42", "cron:a", "hash")
	expect(t, runBin(t, env, "list", "nothing-*"), 0, `no locks match "dlock:nothing-*"`)
	if got := statusJSON(t, env, "list", "nothing-*"); len(got) != 0 {
		t.Fatalf("list of nothing: %+v", got)
	}

	// unlock: refused without --force; with it, removes the holder and wakes the waiter.
	expect(t, runBin(t, env, "unlock", "orders:42"), exitUsage, "refusing without --force", "dlock unlock --force orders:42")
	r = runBin(t, env, "unlock", "--force", "orders:42")
	expect(t, r, 0, `removed the lock "orders:42"`, "holder token "+token, "left", "Waiters were woken")
	wr := waiter.wait()
	expect(t, wr, 0, "acquired "+strconv.FormatUint(fence+1, 10))
	if wr.elapsed > 20*time.Second {
		t.Fatalf("the waiter took %v", wr.elapsed)
	}
	expect(t, holder.wait(), exitLost, "lost the lock")
	if got, _ := rdb.Get(ctx, "{dlock:orders:42}:fence").Uint64(); got < fence+1 {
		t.Fatalf("fencing counter %d after unlock and one more holder, want at least %d", got, fence+1)
	}

	// unlock of a free lock says so; of a foreign key refuses; JSON says the same.
	expect(t, runBin(t, env, "unlock", "--force", "orders:42"), 0, `the lock "orders:42" was not held`)
	expect(t, runBin(t, env, "unlock", "--force", "weird"), exitFailure, "is a Redis hash")
	r = runBin(t, env, "unlock", "--force", "--json", "cron:a", "orders:42")
	expect(t, r, 0)
	var results []unlockResult
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil {
		t.Fatalf("not JSON: %v\n%v", err, r)
	}
	if len(results) != 2 || !results[0].Removed || results[0].Holder != "tok-a" || results[0].TTLms == nil ||
		results[1].Removed || results[1].TTLms != nil {
		t.Fatalf("unlock --json: %+v", results)
	}
	if keyExists(rdb, "dlock:cron:a") || !keyExists(rdb, "dlock:weird") {
		t.Fatal("unlock removed the wrong keys")
	}
}

// TestStatusPrefix: --prefix chooses the namespace, "" for bare keys.
func TestStatusPrefix(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	env := []string{"DLOCK_REDIS=" + serverURL(srv)}
	rdb.Set(context.Background(), "app/job", "t1", time.Minute)
	rdb.Set(context.Background(), "bare", "t2", 0)
	infos := statusJSON(t, env, "status", "--prefix", "app/", "job")
	if !infos[0].Held || infos[0].Holder != "t1" || infos[0].Key != "app/job" {
		t.Fatalf("status --prefix app/: %+v", infos)
	}
	if got := names(statusJSON(t, env, "list", "--prefix", "")); !slices.Equal(got, []string{"app/job", "bare"}) {
		t.Fatalf("list --prefix '': %q", got)
	}
	expect(t, runBin(t, env, "status", "--cluster", "bare"), exitUnavailable, "drop --cluster")
	r := runBin(t, env, "status", "--prefix", "", "bare")
	expect(t, r, 0, "no expiry")
	expect(t, runBin(t, env, "run", "--prefix", "", "bare", "--", "true"), exitNotAcquired, "has no expiry", "unlock --force")
	expect(t, runBin(t, env, "run", "--prefix", "app/", "job", "--", "true"), exitNotAcquired, "s left")
}

// TestStatusQuorum: on a quorum, status shows one row per server.
func TestStatusQuorum(t *testing.T) {
	t.Parallel()
	nodes := redistest.StartNodes(t, 3)
	var env []string
	var urls []string
	for _, n := range nodes {
		urls = append(urls, serverURL(n))
		n.Client(t).Set(context.Background(), "dlock:q", "tok", time.Minute)
	}
	env = append(env, "DLOCK_REDIS="+strings.Join(urls, ","))
	r := runBin(t, env, "status", "q")
	expect(t, r, 0, "NODE", nodes[0].Addr, nodes[1].Addr, nodes[2].Addr)
	infos := statusJSON(t, env, "list")
	if len(infos) != 3 || infos[0].Node != nodes[0].Addr || !infos[2].Held {
		t.Fatalf("list on a quorum: %+v", infos)
	}
	r = runBin(t, env, "unlock", "--force", "q")
	expect(t, r, 0, "on "+nodes[2].Addr)
	if n := strings.Count(r.stdout, "removed the lock"); n != 3 {
		t.Fatalf("removed on %d servers, want 3: %v", n, r)
	}
}

// TestCluster: run, status, list and unlock on a Redis Cluster: the locks spread over
// the masters, waiters are counted with SHARDNUMSUB and woken with SPUBLISH.
func TestCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(t)
	ctx := context.Background()
	env := []string{"DLOCK_REDIS=redis://" + cl.Addrs[0]}
	expect(t, runBin(t, env, "run", "--cluster", "job", "--", "sh", "-c", "echo token=$DLOCK_TOKEN"), 0, "token=1")

	var want []string
	for i := range 12 {
		name := "c" + strconv.Itoa(i)
		want = append(want, name)
		if err := cc.Set(ctx, keysOf(name).Lock, "tok"+strconv.Itoa(i), time.Minute).Err(); err != nil {
			t.Fatal(err)
		}
	}
	slices.Sort(want)
	masters := map[string]bool{}
	for _, name := range want {
		m, err := cc.MasterForKey(ctx, keysOf(name).Lock)
		if err != nil {
			t.Fatal(err)
		}
		masters[m.Options().Addr] = true
	}
	if len(masters) < 2 {
		t.Fatalf("the test's keys all live on one master: %v", masters)
	}
	if got := names(statusJSON(t, env, "list", "--cluster", "c*")); !slices.Equal(got, want) {
		t.Fatalf("list on a cluster: %q, want %q", got, want)
	}

	waiter := startDlock(t, env, "run", "--cluster", "--wait", "60s", "c0", "--", "echo", "acquired")
	waitFor(t, 10*time.Second, "the waiter to subscribe", func() bool {
		infos := statusJSONQuiet(env, "status", "--cluster", "c0")
		return len(infos) == 1 && infos[0].Waiters >= 1
	})
	expect(t, runBin(t, env, "unlock", "--cluster", "--force", "c0"), 0, "holder token tok0")
	r := waiter.wait()
	expect(t, r, 0, "acquired")
	if r.elapsed > 20*time.Second {
		t.Fatalf("the waiter took %v after the unlock", r.elapsed)
	}
}

// statusJSONQuiet is statusJSON for polling: nil on any failure.
func statusJSONQuiet(env []string, args ...string) []lockInfo {
	cmd := exec.Command(dlockBin, append(args, "--json")...)
	cmd.Env = testEnv(env)
	out, err := cmd.Output()
	if err != nil {
		return nil
	}
	var infos []lockInfo
	_ = json.Unmarshal(out, &infos)
	return infos
}

// TestUnlockChangedSaysNothingWasRemoved: a lock that changed hands before every removal
// (dlock.ErrLockChanged) is reported as not removed, and why.
func TestUnlockChangedSaysNothingWasRemoved(t *testing.T) {
	line := describeUnlock(unlockResult{Name: "busy", Changed: true})
	if !strings.HasPrefix(line, `not removed: "busy"`) || !strings.Contains(line, "in use, not stuck") {
		t.Fatalf("describeUnlock of a changed lock: %q", line)
	}
}
