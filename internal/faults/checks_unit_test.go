package faults

import (
	"testing"
	"time"
)

// These run with `go test` (no servers): the checks find what they must on made-up
// histories, and nothing on clean ones.

func TestOverlaps(t *testing.T) {
	clean := []interval{{from: 0, to: 10}, {from: 10, to: 20}, {from: 25, to: 30}}
	if got := overlaps(clean, 5); len(got) != 0 {
		t.Fatalf("overlaps of disjoint holds: %v", got)
	}
	dirty := []interval{{id: "a", from: 0, to: 100}, {id: "b", from: 10, to: 20}, {id: "c", from: 50, to: 60}}
	got := overlaps(dirty, 5)
	if len(got) != 2 || got[0][0].id != "a" || got[1][1].id != "c" {
		t.Fatalf("overlaps = %v, want a with b and a with c", got)
	}
}

func TestMaxFree(t *testing.T) {
	ivs := []interval{{from: 0, to: 10}, {from: 5, to: 30}, {from: 40, to: 50}, {from: 52, to: 60}}
	gap, at := maxFree(ivs)
	if gap != 10 || at != 30 {
		t.Fatalf("maxFree = %v at %d, want 10ns at 30", gap, at)
	}
}

func TestChecksReport(t *testing.T) {
	r := &run{t: t}
	checkTokens(r, []interval{{token: 1}, {token: 3}, {token: 2}, {token: 5, last: 7}})
	checkStoreLog(r, []accepted{{token: 1}, {token: 4}, {token: 3}})
	checkLossOnTime(r, []interval{{how: endLost, valid: 0, endAt: int64(time.Second)}, {how: endLost, valid: 100, endAt: 100}})
	want := []string{chkFencing, chkLossOnTime, chkTokens}
	got := checksOf(r.violations)
	if len(r.violations) != 4 || len(got) != len(want) {
		t.Fatalf("violations %v, want 2 of tokens, 1 of fencing, 1 of loss-on-time", r.violations)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("checks %v, want %v", got, want)
		}
	}
}
