package inspect

import (
	"errors"
	"reflect"
	"testing"
	"time"
)

// TestSummarise: a holder counts when a majority of the nodes has it, with the least time
// left of any (no expiry, -1, only when none has one); the kind is the first found, the
// fence the largest, the waiters each once in the order first seen.
func TestSummarise(t *testing.T) {
	t.Parallel()
	a := func(ttl time.Duration) Holder { return Holder{Token: "a", Permits: 1, TTL: ttl} }
	b := Holder{Token: "b", Permits: 1, TTL: time.Second}
	down := NodeInfo{Addr: "down", Err: errors.New("down")}
	for _, tt := range []struct {
		name  string
		nodes []NodeInfo
		want  LockInfo // without Name, Key and Nodes
	}{
		{name: "no nodes"},
		{name: "free", nodes: []NodeInfo{{}}},
		{
			name:  "one node",
			nodes: []NodeInfo{{Kind: "mutex", Holders: []Holder{a(time.Second)}, Fence: 4, Waiters: []string{"p"}}},
			want:  LockInfo{Kind: "mutex", Holders: []Holder{a(time.Second)}, Fence: 4, Waiters: []string{"p"}},
		},
		{
			name: "a majority with the least time left",
			nodes: []NodeInfo{
				{Kind: "mutex", Holders: []Holder{a(3 * time.Second)}, Fence: 2},
				{Kind: "mutex", Holders: []Holder{a(-1)}, Fence: 9},
				{Kind: "mutex", Holders: []Holder{a(time.Second)}, Fence: 5},
			},
			want: LockInfo{Kind: "mutex", Holders: []Holder{a(time.Second)}, Fence: 9},
		},
		{
			name:  "no expiry anywhere",
			nodes: []NodeInfo{{Holders: []Holder{a(-1)}}, {Holders: []Holder{a(-1)}}, down},
			want:  LockInfo{Holders: []Holder{a(-1)}},
		},
		{
			name: "a split: no majority",
			nodes: []NodeInfo{
				{Kind: "mutex", Holders: []Holder{a(time.Second)}, Waiters: []string{"x", "y"}},
				{Kind: "mutex", Holders: []Holder{b}, Waiters: []string{"y", "z"}},
				down,
			},
			want: LockInfo{Kind: "mutex", Waiters: []string{"x", "y", "z"}},
		},
		{
			name:  "the kind of the first node that found one",
			nodes: []NodeInfo{down, {}, {Kind: "rwmutex"}, {Kind: "mutex"}},
			want:  LockInfo{Kind: "rwmutex"},
		},
	} {
		got := summarise("n", "dlock:n", tt.nodes)
		tt.want.Name, tt.want.Key, tt.want.Nodes = "n", "dlock:n", tt.nodes
		if !reflect.DeepEqual(*got, tt.want) {
			t.Errorf("%s: %+v, want %+v", tt.name, *got, tt.want)
		}
	}
}
