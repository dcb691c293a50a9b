package engine

import (
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"math"
	"testing"
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
	v.answered[i] = true
	switch {
	case r == failedNode:
		v.failed++
		if v.errs == nil {
			v.errs = make([]error, v.n)
		}
		v.errs[i] = errors.New("connection refused")
	case r > 0:
		v.yes++
		v.vals[i] = r
	default:
		v.no++
		v.vals[i] = r
	}
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
