package dlock

import (
	"crypto/sha1"
	"encoding/binary"
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

// TestHeldByOne: a holder with a majority is told from contenders that split the nodes.
func TestHeldByOne(t *testing.T) {
	const granted = 7 // a fencing token: this attempt got the node
	a, b, c := refusalBy("a", 4000), refusalBy("b", 4000), refusalBy("c", 4000)
	readers := refusalBy("", 4000)
	for _, tc := range []struct {
		name    string
		replies []int64 // failedReply for a node whose call failed
		want    int
	}{
		{"one node held", []int64{a}, 1},
		{"a majority holder", []int64{a, a, a, granted, granted}, 3},
		{"split 2/2/1, this attempt has 1", []int64{a, a, b, b, granted}, 2},
		{"split 2/2/1 seen by a fourth contender", []int64{a, a, b, b, c}, 2},
		{"a holder with a majority among contenders", []int64{a, a, a, b, c}, 3},
		{"readers count for every holder", []int64{readers, readers, a, granted, granted}, 3},
		{"failed nodes count for no one", []int64{a, a, failedReply, failedReply, granted}, 2},
		{"nothing refused", []int64{granted, granted, granted}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, _ := newVotes(len(tc.replies))
			for i, r := range tc.replies {
				v.answered[i], v.vals[i] = true, r
			}
			if got := v.heldByOne(); got != tc.want {
				t.Fatalf("heldByOne = %d, want %d", got, tc.want)
			}
		})
	}
}
