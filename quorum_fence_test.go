package dlock_test

import (
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/faultproxy"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// rollingRestarts is how many acquisitions TestQuorumTokensGrowAcrossRollingEmptyRestarts
// makes, each followed by the restart of one node. Before late grants raised their nodes,
// tokens went back in about one run in three.
const rollingRestarts = 200

// TestQuorumTokensGrowAcrossRollingEmptyRestarts: on a quorum of five without
// persistence, one node at a time killed (SIGKILL) and restarted empty after each
// acquisition, in turn, never more than one down. Every node that replied, in time or
// late, was raised to the token it was behind, so the four that were not restarted keep
// step and any majority holds the last token: tokens grow strictly.
func TestQuorumTokensGrowAcrossRollingEmptyRestarts(t *testing.T) {
	servers, _, c := quorumOf(t, 5)
	ctx := ctxTimeout(t, 120*time.Second)
	m := c.Mutex("rolling")
	var last uint64
	for i := range rollingRestarts {
		l := mustLock(t, m, ctx)
		if l.Token() <= last {
			t.Fatalf("acquisition %d: token %d after %d", i, l.Token(), last)
		}
		last = l.Token()
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		s := servers[i%len(servers)]
		s.Kill(t)
		s.Restart(t)
	}
}

// TestQuorumLateGrantRaisesLaggingNode: two nodes of five answer after the other three
// have settled every Lock, and have lost their fencing counters (as a node restarted
// empty has). Their late grants show them behind the token the Lock settled on, and they
// are raised to it, also when the hold has ended before their replies come and when the
// next Lock's grant lands before the raise.
func TestQuorumLateGrantRaisesLaggingNode(t *testing.T) {
	servers := redistest.StartNodes(t, 5)
	direct := make([]*redis.Client, len(servers))
	var nodes []redis.UniversalClient
	for i, s := range servers {
		direct[i] = s.Client(t)
		opt := s.Options()
		if i >= 3 {
			proxy := faultproxy.New(t, s.Addr)
			proxy.SetLatency(t, 50*time.Millisecond) // the per-node timeout is 500ms
			opt.Addr = proxy.Addr
		}
		opt.ReadTimeout = 3 * time.Second
		rdb := redis.NewClient(opt)
		t.Cleanup(func() { _ = rdb.Close() })
		nodes = append(nodes, rdb)
	}
	c := newQuorumClient(t, nodes)
	ctx := ctxTimeout(t, 30*time.Second)
	m := c.Mutex("lagging", dlock.TTL(10*time.Second))
	const fence = "{dlock:lagging}:fence"
	if err := mustLock(t, m, ctx).Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, i := range []int{3, 4} {
		// Once the first Lock's late grant has landed, the node loses its counter.
		waitFor(t, 5*time.Second, fmt.Sprintf("the first grant on node %d", i), func() bool {
			return direct[i].Get(ctx, fence).Val() == "1"
		})
		direct[i].Del(ctx, fence)
	}
	if err := mustLock(t, m, ctx).Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	l := mustLock(t, m, ctx)
	if err := l.Unlock(ctx); err != nil { // before the slow nodes' grants come
		t.Fatal(err)
	}
	want := strconv.FormatUint(l.Token(), 10)
	for _, i := range []int{3, 4} {
		waitFor(t, 5*time.Second, fmt.Sprintf("node %d's counter raised to %s", i, want), func() bool {
			return direct[i].Get(ctx, fence).Val() == want
		})
	}
}
