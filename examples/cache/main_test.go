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
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// The requests start together and the query takes 100ms: without a lock, all of them miss
// the cache before the first rebuild fills it.

func TestCache(t *testing.T) {
	out := runExample(t, "--redis", dlocktest.Start(t).URL, "--servers", "4", "--requests", "10")
	check(t, out, 40)
}

func TestCacheEmbeddedRedis(t *testing.T) {
	out := runExample(t, "--redis", "embedded", "--servers", "2", "--requests", "5")
	check(t, out, 10)
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

var rowRE = regexp.MustCompile(`(?m)^(without a lock|with dlock) +(\d+) +(\d+) `)

// check reads the table: without a lock, more than one rebuild; with dlock, exactly one,
// and every other request served from the cache.
func check(t *testing.T, out []byte, requests int) {
	t.Helper()
	rows := map[string][2]int{}
	for _, m := range rowRE.FindAllSubmatch(out, -1) {
		queries, _ := strconv.Atoi(string(m[2]))
		hits, _ := strconv.Atoi(string(m[3]))
		rows[string(m[1])] = [2]int{queries, hits}
	}
	if r, ok := rows["without a lock"]; !ok {
		t.Errorf("no row for the run without a lock")
	} else if r[0] < 2 || r[0]+r[1] != requests {
		t.Errorf("without a lock: %d queries, %d hits; want several queries, %d requests in all", r[0], r[1], requests)
	}
	if r, ok := rows["with dlock"]; !ok {
		t.Errorf("no row for the run with dlock")
	} else if r != [2]int{1, requests - 1} {
		t.Errorf("with dlock: %d queries, %d hits; want 1 and %d", r[0], r[1], requests-1)
	}
}
