package faults

import (
	"slices"
	"testing"
	"time"
)

// The random scenario's checker on made-up logs (no servers): each check finds what it
// must, and nothing on a clean log. Times are in milliseconds.

const msNs = int64(time.Millisecond)

var testBounds = rndBounds{free: 100 * time.Millisecond, afterglow: 500 * time.Millisecond}

func hold(proc, name, kind string, token uint64, since, from, to int64) rndHold {
	return rndHold{proc: proc, id: "x", name: name, kind: kind, token: token, since: since * msNs, from: from * msNs, to: to * msNs, n: 1}
}

func wait(names []string, from, to int64) rndWait {
	return rndWait{proc: "P", id: "w", names: names, from: from * msNs, to: to * msNs}
}

// cleanLog: a mutex passed on, readers together, a semaphore of 2 full, a MultiMutex's
// waiter that gets its names when both are free, a long free time under a fault.
func cleanLog() rndLog {
	sem := func(token uint64, from, to, n int64) rndHold {
		h := hold("S", "s", "sem", token, 0, from, to)
		h.n, h.size = n, 2
		return h
	}
	return rndLog{
		start: 0, end: 3000 * msNs,
		holds: []rndHold{
			hold("A", "m", "mutex", 1, 0, 0, 100), hold("B", "m", "mutex", 2, 50, 120, 300),
			hold("A", "rw", "read", 1, 0, 0, 200), hold("B", "rw", "read", 2, 0, 100, 250), hold("C", "rw", "write", 3, 10, 260, 400),
			sem(1, 0, 100, 1), sem(2, 10, 100, 1), sem(3, 100, 200, 2), // when both others ended
			hold("M", "m", "multi", 3, 310, 330, 400), hold("M", "m2", "multi", 7, 310, 330, 400),
			hold("A", "m", "mutex", 4, 1000, 2000, 2100),
		},
		waits: []rndWait{
			wait([]string{"m"}, 50, 120), wait([]string{"m", "m2"}, 310, 330), wait([]string{"rw"}, 10, 260),
			wait([]string{"m"}, 1000, 2000), // free for a second, during the fault
		},
		faults: []rndFault{{kind: "pause", target: "X", from: 900 * msNs, to: 1600 * msNs}},
		left:   []leftKey{{node: "n1", key: "{dlock:m}:fence", pttl: -1}, {node: "n1", key: "{dlock:m}:turns", pttl: 30 * time.Second, life: time.Minute}},
	}
}

func TestCheckRandomClean(t *testing.T) {
	res := checkRandom(cleanLog(), testBounds)
	if len(res.violations) != 0 {
		t.Fatalf("violations on a clean log: %v", res.violations)
	}
	if res.longestFree.len() != 20*time.Millisecond || res.freeName != "m" {
		t.Fatalf("longest free %v on %q, want 20ms on m", res.longestFree.len(), res.freeName)
	}
}

// TestCheckRandomViolations breaks the clean log once per check.
func TestCheckRandomViolations(t *testing.T) {
	for _, tc := range []struct {
		check string
		edit  func(l *rndLog)
	}{
		{chkExclusive, func(l *rndLog) { l.holds[0].to = 150 * msNs }},                                            // A held m past B's start
		{chkExclusive, func(l *rndLog) { l.holds[3].kind = "write" }},                                             // a writer among readers
		{chkExclusive, func(l *rndLog) { l.holds[6].n = 2 }},                                                      // 3 permits of 2
		{chkExclusive, func(l *rndLog) { l.holds = append(l.holds, hold("Z", "m2", "multi", 9, 390, 395, 420)) }}, // overlaps M on m2
		{chkTokens, func(l *rndLog) { l.holds[1].token = 1 }},                                                     // B's token not above A's
		{chkTokens, func(l *rndLog) { l.holds[10].token = 3 }},                                                    // equal to the MultiMutex's
		{chkFreeTime, func(l *rndLog) { l.faults = nil }},                                                         // the second of free time counts
		{chkFreeTime, func(l *rndLog) { l.waits = append(l.waits, wait([]string{"never"}, 2500, 2700)) }},
		{chkLeftovers, func(l *rndLog) { l.left = append(l.left, leftKey{node: "n1", key: "{dlock:f}:queue", pttl: -1}) }},
		{chkLeftovers, func(l *rndLog) { l.left = append(l.left, leftKey{node: "n1", key: "dlock:m", pttl: time.Second}) }},
		{chkLeftovers, func(l *rndLog) { l.left[1].pttl = -1 }}, // turns without expiry
	} {
		log := cleanLog()
		tc.edit(&log)
		res := checkRandom(log, testBounds)
		if got := checksOf(res.violations); !slices.Equal(got, []string{tc.check}) {
			t.Errorf("want a violation of %s, got %v", tc.check, res.violations)
		}
	}
}

// TestCheckRandomTokensOverlapping: leases whose acquisitions overlap may get tokens in
// either order; only one called after another returned must have the larger token.
func TestCheckRandomTokensOverlapping(t *testing.T) {
	log := rndLog{end: 1000 * msNs, holds: []rndHold{
		hold("A", "rw", "read", 5, 0, 100, 200), // granted second, returned first
		hold("B", "rw", "read", 4, 0, 150, 200),
	}}
	if vs := checkRndTokens(log); len(vs) != 0 {
		t.Fatalf("overlapping acquisitions: %v", vs)
	}
	log.holds[1].since = 120 * msNs // B called after A returned
	if vs := checkRndTokens(log); len(vs) != 1 {
		t.Fatalf("B called after A returned, with a smaller token: %v", vs)
	}
}

func TestSpans(t *testing.T) {
	a := union([]span{{5, 10}, {0, 3}, {2, 4}, {7, 7}})
	if !slices.Equal(a, []span{{0, 4}, {5, 10}}) {
		t.Fatalf("union = %v", a)
	}
	if got := complement(a, -1, 12); !slices.Equal(got, []span{{-1, 0}, {4, 5}, {10, 12}}) {
		t.Fatalf("complement = %v", got)
	}
	if got := intersect(a, []span{{3, 6}, {8, 20}}); !slices.Equal(got, []span{{3, 4}, {5, 6}, {8, 10}}) {
		t.Fatalf("intersect = %v", got)
	}
	if got := subtract(a, []span{{1, 2}, {6, 7}}); !slices.Equal(got, []span{{0, 1}, {2, 4}, {5, 6}, {7, 10}}) {
		t.Fatalf("subtract = %v", got)
	}
}

// TestCheckRandomUnsureAttempt: an attempt of unknown fate excuses free time on its own
// names for its window, and only there.
func TestCheckRandomUnsureAttempt(t *testing.T) {
	log := cleanLog()
	log.faults = nil // the free second on m now counts
	log.unsure = []rndUnsure{{names: []string{"m2"}, from: 900 * msNs, until: 1600 * msNs}}
	if got := checksOf(checkRandom(log, testBounds).violations); !slices.Equal(got, []string{chkFreeTime}) {
		t.Fatalf("an attempt on m2 excused free time on m: %v", got)
	}
	log.unsure[0].names = []string{"m", "m2"}
	log.unsure[0].until = 2000 * msNs
	if vs := checkRandom(log, testBounds).violations; len(vs) != 0 {
		t.Fatalf("free time within an unsure attempt's window on m: %v", vs)
	}
}
