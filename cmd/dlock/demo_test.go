package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// demoRow is one row of the demo's table.
type demoRow struct {
	sold, left, oversold int
	refused              string
}

// parseDemo reads the table of the demo's output, by round number.
func parseDemo(t *testing.T, r result) map[string]demoRow {
	t.Helper()
	rows := map[string]demoRow{}
	for _, line := range strings.Split(r.stdout, "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || !strings.HasSuffix(f[0], ".") {
			continue
		}
		n := len(f)
		sold, err1 := strconv.Atoi(f[n-4])
		left, err2 := strconv.Atoi(f[n-3])
		over, err3 := strconv.Atoi(f[n-2])
		if err1 != nil || err2 != nil || err3 != nil {
			continue
		}
		rows[f[0]] = demoRow{sold: sold, left: left, oversold: over, refused: f[n-1]}
	}
	if len(rows) != 3 {
		t.Fatalf("want the table's 3 rounds, got %v in\n%v", rows, r)
	}
	return rows
}

func checkDemo(t *testing.T, r result, stock int) {
	t.Helper()
	expect(t, r, 0, "without a lock", "with dlock", "fencing token", "SIGSTOP", "refused it")
	if !strings.Contains(r.stdout, "3. with dlock + Guard") || !strings.Contains(r.stdout, "the stock with Lease.Guard") {
		t.Errorf("round 3 is not the guarded one:\n%s", r.stdout)
	}
	rows := parseDemo(t, r)
	for round, row := range rows {
		if row.sold+row.left != stock || row.oversold != max(0, row.sold-stock) {
			t.Errorf("round %s: sold %d, left %d, oversold %d do not add up to a stock of %d", round, row.sold, row.left, row.oversold, stock)
		}
	}
	for _, round := range []string{"2.", "3."} {
		if row := rows[round]; row.sold != stock || row.left != 0 {
			t.Errorf("round %s sold %d with %d left; want exactly %d", round, row.sold, row.left, stock)
		}
	}
	if n, err := strconv.Atoi(rows["3."].refused); err != nil || n < 1 {
		t.Errorf("round 3 refused %q stale writes, want at least 1", rows["3."].refused)
	}
	if rows["1."].refused != "-" || rows["2."].refused != "-" {
		t.Errorf("rounds 1 and 2 have no fencing, yet show refusals: %+v", rows)
	}
	if strings.Contains(r.stdout, "\r") || strings.Contains(r.stdout, "\033[") {
		t.Errorf("terminal control characters in output that is not a terminal:\n%q", r.stdout)
	}
	t.Log("\n" + r.stdout)
}

func TestDemoEmbedded(t *testing.T) {
	t.Parallel()
	r := runBin(t, nil, "demo", "--buyers", "6", "--stock", "20")
	checkDemo(t, r, 20)
	if !strings.Contains(r.stdout, "embedded Redis (miniredis)") {
		t.Errorf("the demo does not say it runs on the embedded Redis:\n%s", r.stdout)
	}
}

func TestDemoRealRedis(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	r := runBin(t, []string{"DLOCK_REDIS=" + serverURL(srv)}, "demo", "--stock", "30")
	checkDemo(t, r, 30)
	if !strings.Contains(r.stdout, "8 buyer processes, 30 items, on "+srv.Addr) {
		t.Errorf("the demo does not name its server:\n%s", r.stdout)
	}
	if keys, _ := srv.Client(t).Keys(t.Context(), "dlock-demo:*").Result(); len(keys) != 0 {
		t.Errorf("the demo left its store behind: %q", keys)
	}
}

// TestDemoQuorum: on a quorum, which Guard refuses, round 3 fences the store with tokens.
func TestDemoQuorum(t *testing.T) {
	t.Parallel()
	args := []string{"demo", "--buyers", "3", "--stock", "10"}
	for _, s := range redistest.StartNodes(t, 3) {
		args = append(args, "--redis", serverURL(s))
	}
	r := runBin(t, nil, args...)
	expect(t, r, 0, "3. with dlock + fencing token", "the store had already seen token")
	if rows := parseDemo(t, r); rows["3."].sold != 10 || rows["3."].refused == "0" {
		t.Errorf("round 3 on a quorum: %+v", rows["3."])
	}
}

func TestDemoCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	r := runBin(t, nil, "demo", "--cluster", "--redis", "redis://"+cl.Addrs[1], "--buyers", "3", "--stock", "10")
	checkDemo(t, r, 10)
}
