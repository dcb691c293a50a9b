package dlock

import (
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"
)

// refusalBy is what an acquire script replies when holder (a token; "" for no single
// holder) refuses with ms left: see refusal.lua.
func refusalBy(holder string, ms int64) int64 {
	tag := int64(0)
	if holder != "" {
		sum := sha1.Sum([]byte(holder))
		tag = int64(max(binary.BigEndian.Uint16(sum[:2]), 1))
	}
	return -(ms<<16 | tag)
}

// failedNode stands in the tables for a node whose call failed.
const failedNode = math.MinInt64

// answer records node i's reply r as poll does.
func answer(v *votes, i int, r int64) {
	var err error
	if r == failedNode {
		err = errors.New("connection refused")
	}
	v.tally(i, r, err)
}

// TestHeldByOne: a holder with a majority is told from contenders that split the nodes.
func TestHeldByOne(t *testing.T) {
	const granted = 7 // a fencing token: this attempt got the node
	a, b, c := refusalBy("a", 4000), refusalBy("b", 4000), refusalBy("c", 4000)
	readers := refusalBy("", 4000)
	for _, tc := range []struct {
		name    string
		replies []int64 // failedNode for a node whose call failed
		want    int
	}{
		{"one node held", []int64{a}, 1},
		{"a majority holder", []int64{a, a, a, granted, granted}, 3},
		{"split 2/2/1, this attempt has 1", []int64{a, a, b, b, granted}, 2},
		{"split 2/2/1 seen by a fourth contender", []int64{a, a, b, b, c}, 2},
		{"a holder with a majority among contenders", []int64{a, a, a, b, c}, 3},
		{"readers count for every holder", []int64{readers, readers, a, granted, granted}, 3},
		{"failed nodes count for no one", []int64{a, a, failedNode, failedNode, granted}, 2},
		{"nothing refused", []int64{granted, granted, granted}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := newVotes(len(tc.replies))
			for i, r := range tc.replies {
				answer(v, i, r)
			}
			if got := v.heldByOne(); got != tc.want {
				t.Fatalf("heldByOne = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestVerdict: what an attempt comes to, from its votes alone.
func TestVerdict(t *testing.T) {
	const granted = 7
	a, b := refusalBy("a", 4000), refusalBy("b", 4000)
	for _, tc := range []struct {
		name    string
		replies []int64 // failedNode for a failed node, 0 for no answer (unless decided)
		decided bool
		inTime  bool
		want    verdict
	}{
		{"one node grants", []int64{granted}, true, true, acquired},
		{"one node grants too late", []int64{granted}, true, false, late},
		{"one node held", []int64{a}, true, true, held},
		{"one node failed", []int64{failedNode}, true, true, failed},
		{"a majority grants", []int64{granted, granted, granted, a, failedNode}, true, true, acquired},
		{"a majority grants too late", []int64{granted, granted, granted, b, b}, true, false, late},
		{"a holder's majority", []int64{a, a, a, granted, granted}, true, true, held},
		{"split 2/2/1", []int64{a, a, b, b, granted}, true, true, split},
		{"split with a failed node", []int64{a, a, b, granted, failedNode}, true, true, split},
		{"too many failed", []int64{a, a, failedNode, failedNode, failedNode}, true, true, failed},
		{"no answer from a majority", []int64{granted, a, 0, 0, 0}, false, true, failed},
		{"silence after a clear refusal", []int64{a, a, a, 0, 0}, true, true, held},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := newVotes(len(tc.replies))
			v.decided = tc.decided
			for i, r := range tc.replies {
				if r != 0 { // 0: not answered
					answer(v, i, r)
				}
			}
			need := len(tc.replies)/2 + 1
			if got := v.verdict(need, tc.inTime); got != tc.want {
				t.Fatalf("verdict = %d, want %d", got, tc.want)
			}
		})
	}
}

// TestSilentNodeNotAwaited: a contended attempt does not wait for a node that went silent
// (a hung or blackholed server), unless too few nodes are left for any verdict without it;
// a node is silent from a poll that timed out waiting for it until it answers.
func TestSilentNodeNotAwaited(t *testing.T) {
	const granted = 7
	a := refusalBy("a", 4000)
	for _, tc := range []struct {
		name    string
		silent  []int   // the nodes that were silent as the poll began
		replies []int64 // nodes 0.. answer in this order; the rest have not answered
		want    bool
	}{
		{"two silent of five, a split among the rest", []int{3, 4}, []int64{granted, granted, a}, true},
		{"two silent of five, held by another", []int{3, 4}, []int64{a, a, a}, true},
		{"two silent of five, no refusal yet", []int{3, 4}, []int64{granted, granted}, false},
		{"no silent node: wait for the last two", nil, []int64{granted, granted, a}, false},
		{"three silent of five: wait, their answer decides if there is a verdict", []int{2, 3, 4}, []int64{granted, a}, false},
		{"a silent node answers: it counts again", []int{2, 4}, []int64{granted, a, granted}, false},
		{"refusals alone settle it", nil, []int64{a, a, a}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := make([]*node, 5)
			now := time.Now()
			for i := range nodes {
				nodes[i] = &node{}
			}
			for _, i := range tc.silent {
				nodes[i].heard(false, now, time.Second)
			}
			v, _ := newVotes(len(nodes))
			v.markSilent(nodes, nil)
			for i, r := range tc.replies {
				answer(v, i, r)
			}
			if got := v.cannotWin(3); got != tc.want {
				t.Errorf("cannotWin = %v, want %v (votes %+v)", got, tc.want, v)
			}
		})
	}
}

// TestNodeSilence: which polls make a node silent, keep it silent, or clear it.
func TestNodeSilence(t *testing.T) {
	for _, tc := range []struct {
		name       string
		wasSilent  bool
		answered   bool
		decided    bool
		ctxEnded   bool
		wantSilent bool
	}{
		{"no answer within the whole timeout", false, false, false, false, true},
		{"answered", true, true, false, false, false},
		{"answered after a decision", true, true, true, false, false},
		{"not awaited, decided without it", false, false, true, false, false},
		{"silent, still no answer when decided", true, false, true, false, true},
		{"ctx ended the poll", false, false, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := []*node{{}, {}, {}}
			if tc.wasSilent {
				nodes[0].heard(false, time.Now(), time.Second)
			}
			v, _ := newVotes(len(nodes))
			v.markSilent(nodes, nil)
			if tc.answered {
				answer(v, 0, 1)
			}
			v.decided = tc.decided
			if tc.ctxEnded {
				v.ctxErr = context.Canceled
			}
			v.record(nodes, nil, time.Second)
			if got := nodes[0].silent(time.Now()); got != tc.wantSilent {
				t.Errorf("silent = %v, want %v", got, tc.wantSilent)
			}
			if nodes[0].silent(time.Now().Add(silentPolls * time.Second)) {
				t.Errorf("still silent after %d timeouts: a node that came back must be heard again", silentPolls)
			}
		})
	}
}
