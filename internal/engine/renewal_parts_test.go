package engine

import (
	"errors"
	"testing"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// TestRenewalCountsEveryPart: the renewal of a MultiMutex over several hash slots (one
// entry per part, in a row) is counted by its worst part, and a failure is explained by
// that part's replies, not the first part's.
func TestRenewalCountsEveryPart(t *testing.T) {
	down := errors.New("part down")
	renewed := &batch.Call{Val: 1}
	failed := &batch.Call{Err: down}
	gone := &batch.Call{Val: 0}
	h, other := &Hold{}, &Hold{}
	for _, tt := range []struct {
		name                  string
		holds                 []*Hold
		calls                 []*batch.Call // one node's, by index in the batch
		ok, gone, next, worst int
	}{
		{"one part renewed", []*Hold{h}, []*batch.Call{renewed}, 1, 0, 1, 0},
		{"every part renewed", []*Hold{h, h, h}, []*batch.Call{renewed, renewed, renewed}, 1, 0, 3, 0},
		{"a later part failed", []*Hold{h, h, h}, []*batch.Call{renewed, renewed, failed}, 0, 0, 3, 2},
		{"a later part gone", []*Hold{h, h}, []*batch.Call{renewed, gone}, 0, 1, 2, 1},
		{"the next hold is not a part", []*Hold{h, other}, []*batch.Call{renewed, failed}, 1, 0, 1, 0},
	} {
		t.Run(tt.name, func(t *testing.T) {
			b := &renewals{holds: tt.holds}
			at := renewReplies{calls: [][]*batch.Call{tt.calls}, answered: []bool{true}, i: 0}
			ok, gone, next, worst := b.counted(at)
			if ok != tt.ok || gone != tt.gone || next != tt.next || worst != tt.worst {
				t.Fatalf("counted = ok %d, gone %d, next %d, worst %d; want %d, %d, %d, %d", ok, gone, next, worst, tt.ok, tt.gone, tt.next, tt.worst)
			}
			if tt.calls[worst].Err == nil && tt.calls[worst].Val == 1 && ok == 0 {
				t.Fatalf("worst part %d renewed, yet the renewal failed", worst)
			}
		})
	}
}
