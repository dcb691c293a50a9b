package main

import (
	"bytes"
	"context"
	"regexp"
	"strconv"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/seed51c676c8/dlock/dlocktest"
	"github.com/seed51c676c8/dlock/examples/internal/testsrv"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The buyers' "payment" sleep makes the race of the unlocked run reliable: with 10 buyers,
// the ones that read the last items' stock are still paying when it reaches 0.

func TestSQLite(t *testing.T) {
	out := runExample(t, "--redis", dlocktest.Start(t).URL, "--buyers", "10", "--stock", "20")
	check(t, out, 20)
}

func TestSQLiteFile(t *testing.T) {
	path := t.TempDir() + "/shop.db"
	out := runExample(t, "--redis", dlocktest.Start(t).URL, "--db", path, "--buyers", "8", "--stock", "10")
	check(t, out, 10)
	if !bytes.Contains(out, []byte("SQLite file "+path)) {
		t.Errorf("the output does not name the database %s:\n%s", path, out)
	}
}

func TestPostgres(t *testing.T) {
	out := runExample(t, "--redis", dlocktest.Start(t).URL, "--db", testsrv.Postgres(t), "--buyers", "10", "--stock", "20")
	check(t, out, 20)
	if !bytes.Contains(out, []byte("Database: PostgreSQL at 127.0.0.1:")) {
		t.Errorf("the output does not say PostgreSQL:\n%s", out)
	}
}

func TestEmbeddedRedis(t *testing.T) {
	out := runExample(t, "--redis", "embedded", "--buyers", "8", "--stock", "10")
	check(t, out, 10)
	if !bytes.Contains(out, []byte("Redis:    embedded Redis (miniredis)")) {
		t.Errorf("the output does not say the Redis is embedded:\n%s", out)
	}
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
	rowRE     = regexp.MustCompile(`(?m)^(without a lock|with dlock) +(-?\d+) +(-?\d+) `)
	fenceBRE  = regexp.MustCompile(`(?m)^  buyer B  locks: token (\d+); .*UPDATE with token \d+: 1 row updated$`)
	fenceARE  = regexp.MustCompile(`(?m)^  buyer A  UPDATE with token (\d+): 0 rows updated: refused`)
	fenceEnd  = regexp.MustCompile(`(?m)^1 sold, stock (\d+): the stale holder's write was refused\.$`)
	unfenceRE = regexp.MustCompile(`without the token check the same UPDATE changes 1 row`)
)

// check reads the numbers in the output: the unlocked sale oversold, the locked one sold
// exactly the stock, and the stale holder's fenced write was refused.
func check(t *testing.T, out []byte, stock int) {
	t.Helper()
	rows := map[string][2]int{}
	for _, m := range rowRE.FindAllSubmatch(out, -1) {
		sold, _ := strconv.Atoi(string(m[2]))
		left, _ := strconv.Atoi(string(m[3]))
		rows[string(m[1])] = [2]int{sold, left}
	}
	if r, ok := rows["without a lock"]; !ok {
		t.Errorf("no row for the run without a lock")
	} else if r[0] <= stock || r[1] >= 0 {
		t.Errorf("without a lock: sold %d, stock left %d; want more than %d sold and a negative stock", r[0], r[1], stock)
	} else if r[0]+r[1] != stock {
		t.Errorf("without a lock: sold %d, stock left %d; want them to add up to %d", r[0], r[1], stock)
	}
	if r, ok := rows["with dlock"]; !ok {
		t.Errorf("no row for the run with dlock")
	} else if r != [2]int{stock, 0} {
		t.Errorf("with dlock: sold %d, stock left %d; want %d and 0", r[0], r[1], stock)
	}

	b, a := fenceBRE.FindSubmatch(out), fenceARE.FindSubmatch(out)
	if b == nil || a == nil {
		t.Fatalf("the fencing lines are missing or say otherwise")
	}
	tokenB, _ := strconv.ParseUint(string(b[1]), 10, 64)
	tokenA, _ := strconv.ParseUint(string(a[1]), 10, 64)
	if tokenB <= tokenA {
		t.Errorf("buyer B's token %d is not greater than buyer A's %d", tokenB, tokenA)
	}
	if !unfenceRE.Match(out) {
		t.Errorf("the output does not show that the unfenced UPDATE would have written")
	}
	if m := fenceEnd.FindSubmatch(out); m == nil || string(m[1]) != strconv.Itoa(stock-1) {
		t.Errorf("want the fencing run to end with 1 sold and stock %d", stock-1)
	}
}
