package engine

import (
	"errors"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// TestRenewalCountsEveryPart: the renewal of a MultiMutex over several hash slots (one
// entry per part, in a row) is counted by its worst part, and a failure is explained by
// that part's error, not the first part's.
func TestRenewalCountsEveryPart(t *testing.T) {
	down := errors.New("part down")
	renewed := &batch.Call{Val: 1}
	failed := &batch.Call{Err: down}
	gone := &batch.Call{Val: 0}
	h, other := &Hold{}, &Hold{}
	for _, tt := range []struct {
		name           string
		holds          []*Hold
		calls          []*batch.Call // one node's, by index in the batch
		ok, gone, next int
		err            error
	}{
		{"one part renewed", []*Hold{h}, []*batch.Call{renewed}, 1, 0, 1, nil},
		{"every part renewed", []*Hold{h, h, h}, []*batch.Call{renewed, renewed, renewed}, 1, 0, 3, nil},
		{"a later part failed", []*Hold{h, h, h}, []*batch.Call{renewed, renewed, failed}, 0, 0, 3, down},
		{"a later part gone", []*Hold{h, h}, []*batch.Call{renewed, gone}, 0, 1, 2, nil},
		{"gone outweighs failed", []*Hold{h, h}, []*batch.Call{failed, gone}, 0, 1, 2, nil},
		{"the next hold is not a part", []*Hold{h, other}, []*batch.Call{renewed, failed}, 1, 0, 1, nil},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := &renewals{holds: tt.holds}
			v, _ := newVotes(1, 1)
			next := b.count(v, [][]*batch.Call{tt.calls}, []bool{true}, 0)
			if v.yes != tt.ok || v.no != tt.gone || next != tt.next {
				t.Fatalf("count = ok %d, gone %d, next %d; want %d, %d, %d", v.yes, v.no, next, tt.ok, tt.gone, tt.next)
			}
			if got := v.errAt(0); got != tt.err {
				t.Fatalf("node's error = %v, want %v", got, tt.err)
			}
		})
	}
}

// TestRenewalOfUnansweredNodeIsNoVote: a node that did not answer every call of the batch
// counts for no hold, and the renewal's error names it as silent.
func TestRenewalOfUnansweredNodeIsNoVote(t *testing.T) {
	h := &Hold{}
	b := &renewals{holds: []*Hold{h}, start: time.Now()}
	v, _ := newVotes(2, 1)
	b.count(v, [][]*batch.Call{{{Val: 1}}, {{Val: 1}}}, []bool{true, false}, 0)
	if v.yes != 1 || v.unanswered() != 1 {
		t.Fatalf("yes %d, unanswered %d; want 1, 1", v.yes, v.unanswered())
	}
	if p := v.problems([]*Node{{Name: "a"}, {Name: "b"}}); len(p) != 1 || p[0].Addr != "b" {
		t.Fatalf("problems = %v, want node b's silence", p)
	}
}

// TestRenewalCountsEachPartsOwnMajority: a MultiMutex over several hash slots on a quorum
// holds each part by a majority of its own, which need not be the same nodes for every part
// (acquireParts judges each part's poll alone). Its renewal keeps the hold while every part
// is renewed by a majority: a node that renewed one part and not another is no reason to
// lose names that every part still holds. Here part A is renewed on nodes 1 and 2, part B
// on nodes 0 and 1.
func TestRenewalCountsEachPartsOwnMajority(t *testing.T) {
	renewed, gone := &batch.Call{Val: 1}, &batch.Call{Val: 0}
	h := &Hold{}
	b := &renewals{holds: []*Hold{h, h}, start: time.Now()}
	replies := [][]*batch.Call{
		{gone, renewed},    // node 0: A gone, B renewed
		{renewed, renewed}, // node 1: both renewed
		{renewed, gone},    // node 2: A renewed, B gone
	}
	v, _ := newVotes(3, 1)
	b.count(v, replies, []bool{true, true, true}, 0)
	n, need := 3, 2
	if v.no > n-need {
		t.Fatalf("renewal counts %d nodes that no longer hold the hold (yes %d): it would be lost, though each part is renewed on 2 of 3 nodes", v.no, v.yes)
	}
	if v.yes < need {
		t.Fatalf("renewal counts %d nodes that renewed, want at least %d: each part is renewed on 2 of 3 nodes", v.yes, need)
	}
}
