package engine

import (
	"context"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"math"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
			v, _ := newVotes(len(tc.replies), 1)
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
			v, _ := newVotes(len(tc.replies), 1)
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

// reply is one node's answer to a simulated poll.
type reply struct {
	node int
	val  int64 // failedNode for a call that failed
}

// simulatePoll runs an acquisition poll on 5 nodes (or len(silent) given as n) as poll
// and acquireOnce do: the nodes in silent were silent as it began; the replies come in
// order, until the attempt's decide says it is settled; a poll not settled timed out.
func simulatePoll(n, need int, silent []int, replies []reply) (*votes, verdict) {
	nodes := make([]*Node, n)
	for i := range nodes {
		nodes[i] = &Node{}
	}
	for _, i := range silent {
		nodes[i].missed(time.Minute)
	}
	v, _ := newVotes(n, 1)
	v.markSilent(nodes, nil)
	for _, r := range replies {
		answer(v, r.node, r.val)
		if v.decided = v.settled(need); v.decided {
			break
		}
	}
	return v, v.verdict(need, true)
}

// TestSilentNodeNotAwaited: once every other node has answered, an attempt does not wait
// for a node that went silent (hung, blackholed) to tell a held lock or a split vote; it
// still waits for silent nodes when without them no verdict is possible, and a silent
// node that answers counts.
func TestSilentNodeNotAwaited(t *testing.T) {
	const granted = 7
	a, b := refusalBy("a", 4000), refusalBy("b", 4000)
	for _, tc := range []struct {
		name        string
		n, need     int
		silent      []int
		replies     []reply
		want        verdict
		wantDecided bool
	}{
		{"held, 1 of 5 silent", 5, 3, []int{4}, []reply{{0, a}, {1, a}, {2, a}, {3, a}}, held, true},
		{"held, 2 of 5 silent", 5, 3, []int{3, 4}, []reply{{0, a}, {1, a}, {2, a}}, held, true},
		{"held, 1 of 3 silent", 3, 2, []int{2}, []reply{{0, a}, {1, a}}, held, true},
		{"split, 2 of 5 silent", 5, 3, []int{3, 4}, []reply{{0, granted}, {1, granted}, {2, a}}, split, true},
		{"split, 1 of 5 silent", 5, 3, []int{4}, []reply{{0, granted}, {1, granted}, {2, a}, {3, b}}, split, true},
		{"a live node still to answer: wait", 5, 3, []int{4}, []reply{{0, granted}, {1, a}, {2, b}}, split, false},
		{"no silent node: wait for the last two", 5, 3, nil, []reply{{0, granted}, {1, granted}, {2, a}}, split, false},
		{"3 of 5 silent: wait, they decide whether there is a verdict", 5, 3, []int{2, 3, 4}, []reply{{0, granted}, {1, a}}, failed, false},
		{"a silent node that answers counts", 5, 3, []int{3, 4}, []reply{{3, granted}, {0, granted}, {1, a}, {2, granted}}, acquired, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, got := simulatePoll(tc.n, tc.need, tc.silent, tc.replies)
			if got != tc.want || v.decided != tc.wantDecided {
				t.Errorf("verdict %v, decided %v; want %v, %v (votes %+v)", got, v.decided, tc.want, tc.wantDecided, v)
			}
		})
	}
}

// TestNodeSilence: which polls make a node silent, keep it silent, or clear it.
func TestNodeSilence(t *testing.T) {
	transport := errors.New("read tcp: i/o timeout")
	for _, tc := range []struct {
		name       string
		wasSilent  bool
		answer     *error // nil: no answer
		decided    bool
		ctxEnded   bool
		wantSilent bool
	}{
		{"no answer within the whole timeout", false, nil, false, false, true},
		{"a reply clears it", true, new(error), false, false, false},
		{"a reply after a decision clears it", true, new(error), true, false, false},
		{"an error reply clears it", true, &errNoScript, false, false, false},
		{"a transport error does not clear it", true, &transport, false, false, true},
		{"a transport error does not make it", false, &transport, false, false, false},
		{"not awaited: decided without it", false, nil, true, false, false},
		{"silent, still no answer when decided", true, nil, true, false, true},
		{"ctx ended the poll", false, nil, false, true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			nodes := []*Node{{}, {}, {}}
			if tc.wasSilent {
				nodes[0].missed(time.Minute)
			}
			v, _ := newVotes(len(nodes), 1)
			v.markSilent(nodes, nil)
			if tc.answer != nil {
				v.tally(0, 1, *tc.answer)
			}
			v.decided = tc.decided
			if tc.ctxEnded {
				v.ctxErr = context.Canceled
			}
			v.record(nodes, nil, time.Minute)
			if got := nodes[0].silent(); got != tc.wantSilent {
				t.Errorf("silent = %v, want %v", got, tc.wantSilent)
			}
		})
	}
}

// errNoScript stands for an error reply: the server answered.
var errNoScript error = errorReply("NOSCRIPT No matching script")

// errorReply is an error reply of Redis, as the transports give them (redis.Error).
type errorReply string

func (e errorReply) Error() string { return string(e) }
func (errorReply) RedisError()     {}

var _ redis.Error = errorReply("")

// TestSilenceLapses: a silent node is waited for again after silentPolls timeouts.
func TestSilenceLapses(t *testing.T) {
	n := &Node{}
	n.missed(time.Millisecond)
	if !n.silent() {
		t.Fatal("not silent right after a missed poll")
	}
	time.Sleep(2 * silentPolls * time.Millisecond)
	if n.silent() {
		t.Fatalf("still silent after %d timeouts", 2*silentPolls)
	}
}

// TestPartsAnswerAsOneNode: in a poll of several parts, a node counts as answered once
// every part has answered, with a no if any part refused, else an error if any failed,
// else the smallest yes; yes and no are the fewest yes and the most no of any part; a node
// with a part still out is unanswered.
func TestPartsAnswerAsOneNode(t *testing.T) {
	down := errors.New("down")
	type part struct {
		val int64
		err error
	}
	for _, tc := range []struct {
		name           string
		parts          []part // one node's replies, in order; fewer than 3: some still out
		yes, no, fails int
		val            int64
	}{
		{"every part yes", []part{{5, nil}, {3, nil}, {4, nil}}, 1, 0, 0, 3},
		{"one part refused", []part{{5, nil}, {0, nil}, {4, nil}}, 0, 1, 0, 0},
		{"refusal outweighs failure", []part{{0, down}, {-7, nil}, {4, nil}}, 0, 1, 0, -7},
		{"one part failed", []part{{5, nil}, {0, down}, {4, nil}}, 0, 0, 1, 0},
		{"a part still out", []part{{5, nil}, {3, nil}}, 0, 0, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, calls := newVotes(1, 3)
			if len(calls) != 3 {
				t.Fatalf("%d calls for 3 parts of 1 node", len(calls))
			}
			for i, p := range tc.parts {
				v.reply(0, i, p.val, p.err)
			}
			if v.yes != tc.yes || v.no != tc.no || v.failed != tc.fails || v.vals[0] != tc.val {
				t.Fatalf("yes %d no %d failed %d val %d; want %d %d %d %d", v.yes, v.no, v.failed, v.vals[0], tc.yes, tc.no, tc.fails, tc.val)
			}
			if v.seen != len(tc.parts) || (len(tc.parts) < 3) != (v.unanswered() == 1) {
				t.Fatalf("seen %d, unanswered %d", v.seen, v.unanswered())
			}
		})
	}
}
