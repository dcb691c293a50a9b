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

// The members start together and the verification sleeps 50ms between the check and the
// insert: without a lock, the members of a family all pass the check before the first
// insert lands.

func TestReward(t *testing.T) {
	out := runExample(t, "--redis", dlocktest.Start(t).URL, "--families", "3", "--members", "4")
	check(t, out, 3)
}

func TestRewardEmbeddedRedis(t *testing.T) {
	out := runExample(t, "--redis", "embedded", "--families", "2", "--members", "3")
	check(t, out, 2)
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

var rowRE = regexp.MustCompile(`(?m)^(family-\d+|total) +(\d+) +(\d+)$`)

// check reads the table: without a lock, more claims than families; with dlock, one per
// family.
func check(t *testing.T, out []byte, families int) {
	t.Helper()
	seen := 0
	for _, m := range rowRE.FindAllSubmatch(out, -1) {
		without, _ := strconv.Atoi(string(m[2]))
		with, _ := strconv.Atoi(string(m[3]))
		if string(m[1]) == "total" {
			if without <= families {
				t.Errorf("without a lock: %d claims in all for %d families; want more (the race did not show)", without, families)
			}
			if with != families {
				t.Errorf("with dlock: %d claims in all for %d families; want one each", with, families)
			}
			continue
		}
		seen++
		if with != 1 {
			t.Errorf("%s: %d claims with dlock, want 1", m[1], with)
		}
	}
	if seen != families {
		t.Errorf("the table has %d family rows, want %d", seen, families)
	}
}
