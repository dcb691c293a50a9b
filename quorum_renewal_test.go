package dlock_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/faultproxy"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestQuorumRenewalDoesNotWaitForASilentNode: with one of three nodes paused, a renewal's
// verdict comes once the other two have answered and the per-node timeout has passed, not
// at the renewal's whole timeout (a third of the TTL). What it waits comes off the time
// between the verdict and the lease's old deadline, every renewal while the node is
// silent. Each renewal moves ValidUntil to its send time + TTL − drift, so the time left
// at the moment it moves is TTL − drift − the verdict's delay.
func TestQuorumRenewalDoesNotWaitForASilentNode(t *testing.T) {
	servers, nodes, _ := quorumOf(t, 3)
	c := newQuorumClient(t, nodes)
	ctx := ctxTimeout(t, 30*time.Second)
	const ttl = 3 * time.Second // per-node timeout 300ms; the renewal's timeout 1s
	l := mustLock(t, c.Mutex("silent-renewal", dlock.TTL(ttl)), ctx)
	servers[0].Pause(t)
	defer servers[0].Resume(t)

	// The first renewal may have been sent before the pause: three after it.
	prev, moves := l.ValidUntil(), 0
	for moves < 4 {
		if err := l.Err(); err != nil {
			t.Fatalf("lease lost while two of three nodes renewed it: %v", err)
		}
		time.Sleep(2 * time.Millisecond)
		v := l.ValidUntil()
		if !v.After(prev) {
			continue
		}
		left := time.Until(v)
		prev, moves = v, moves+1
		t.Logf("renewal %d: %v left at its verdict", moves, left.Round(time.Millisecond))
		// 1.97s if it waited the whole timeout; 2.67s if it waited the per-node timeout.
		if moves > 1 && left < ttl-700*time.Millisecond {
			t.Fatalf("a renewal's verdict left %v of a %v lease: it waited for the silent node", left, ttl)
		}
	}
	servers[0].Resume(t)
	_ = l.Unlock(ctx)
}

// TestQuorumRenewalWaitsWhenAnotherNodeFails: a node that answers a renewal at once with an
// error or a refusal renewed nothing. With one node failing every renewal (a key of the
// wrong type, or none) and another slower than the per-node timeout, only the slow node's
// renewal makes the majority: a renewal that took the failing node's answer for a renewal would stop waiting
// at the per-node timeout, count one node of two, and lose the lease at its deadline.
func TestQuorumRenewalWaitsWhenAnotherNodeFails(t *testing.T) {
	for _, tt := range []struct {
		name  string
		spoil func(ctx context.Context, rdb redis.UniversalClient, key string) error
	}{
		{"wrong type", func(ctx context.Context, rdb redis.UniversalClient, key string) error {
			if err := rdb.Del(ctx, key).Err(); err != nil {
				return err
			}
			return rdb.HSet(ctx, key, "not", "a token").Err()
		}},
		{"gone", func(ctx context.Context, rdb redis.UniversalClient, key string) error {
			return rdb.Del(ctx, key).Err()
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			nodes, proxy := quorumWithSlowLast(t, 3)
			c := newQuorumClient(t, nodes)
			ctx := ctxTimeout(t, 30*time.Second)
			const ttl = 3 * time.Second // per-node timeout 300ms; the renewal's timeout 1s
			l := mustLock(t, c.Mutex("fails", dlock.TTL(ttl)), ctx)
			proxy.SetLatency(t, 500*time.Millisecond)
			if err := tt.spoil(ctx, nodes[1], "dlock:fails"); err != nil {
				t.Fatal(err)
			}
			leaseOutlivesTTL(t, l, ttl)
			proxy.SetLatency(t, 0)
			_ = l.Unlock(ctx)
		})
	}
}

// TestQuorumRenewalDoesNotReportASlowNodeSilent: a node slower than the per-node timeout
// but well within the renewal's timeout answers every renewal. A Lock or Unlock that a
// majority settles without it does not report it silent
// (TestQuorumLockDoesNotWaitForASlowNode); nor may a renewal that the other nodes settled,
// which then gives up on it at the per-node timeout and never hears the reply that comes
// after: the node stays silent while it answers every renewal, for observers (NodeSilent,
// the DlockNodeSilent alert) and for the attempts and waiters that no longer wait for it.
func TestQuorumRenewalDoesNotReportASlowNodeSilent(t *testing.T) {
	nodes, proxy := quorumWithSlowLast(t, 3)
	c, silent := silenceCounted(t, nodes)
	ctx := ctxTimeout(t, 30*time.Second)
	// Per-node timeout 500ms; the renewal's timeout 2s, room for a connection dialled
	// through the slow link, or a script loaded again, ahead of a renewal.
	const ttl = 6 * time.Second
	l := mustLock(t, c.Mutex("slow-renewal", dlock.TTL(ttl)), ctx)
	proxy.SetLatency(t, 600*time.Millisecond) // over the per-node timeout; three round trips under the renewal's
	leaseOutlivesTTL(t, l, ttl)
	proxy.SetLatency(t, 0)
	if n := silent.Load(); n != 0 {
		t.Fatalf("a node that answered every renewal within its timeout was reported silent %d times", n)
	}
	_ = l.Unlock(ctx)
}

// TestQuorumRenewalWaitsForEveryNodeItNeeds: a Semaphore of 2 on 3 nodes needs all three
// (2 holders cannot then each find room on the nodes of the other), so its renewal waits
// for a node slower than the per-node timeout, though a majority renewed it at once.
func TestQuorumRenewalWaitsForEveryNodeItNeeds(t *testing.T) {
	nodes, proxy := quorumWithSlowLast(t, 3)
	c := newQuorumClient(t, nodes)
	ctx := ctxTimeout(t, 30*time.Second)
	const ttl = 3 * time.Second
	l, err := c.Semaphore("needs-all", 2, dlock.TTL(ttl)).Acquire(ctx, 1)
	if err != nil {
		t.Fatal(err)
	}
	proxy.SetLatency(t, 500*time.Millisecond)
	leaseOutlivesTTL(t, l, ttl)
	proxy.SetLatency(t, 0)
	_ = l.Unlock(ctx)
}

// quorumWithSlowLast starts n nodes, the last behind a fault proxy.
func quorumWithSlowLast(t *testing.T, n int) ([]redis.UniversalClient, *faultproxy.Proxy) {
	servers := redistest.StartNodes(t, n)
	proxy := faultproxy.New(t, servers[n-1].Addr)
	var nodes []redis.UniversalClient
	for i, s := range servers {
		opt := s.Options()
		if i == n-1 {
			opt.Addr = proxy.Addr
		}
		opt.ReadTimeout = 3 * time.Second
		rdb := redis.NewClient(opt)
		t.Cleanup(func() { _ = rdb.Close() })
		nodes = append(nodes, rdb)
	}
	return nodes, proxy
}

// silenceCounted returns a quorum Client of nodes that counts its NodeSilent events.
func silenceCounted(t *testing.T, nodes []redis.UniversalClient) (*dlock.Client, *atomic.Int64) {
	var silent atomic.Int64
	c := newQuorumClient(t, nodes, dlock.WithObserver(dlock.Observer{
		NodeSilent: func(dlock.NodeSilence) { silent.Add(1) },
	}))
	return c, &silent
}

// leaseOutlivesTTL waits past l's first deadline (three renewals or more) and fails the
// test if l was lost or never renewed.
func leaseOutlivesTTL(t *testing.T, l *dlock.Lease, ttl time.Duration) {
	t.Helper()
	first := l.ValidUntil()
	time.Sleep(ttl + ttl/6)
	if err := l.Err(); err != nil {
		t.Fatalf("lease lost while the nodes it needs renewed it, one of them slowly: %v", err)
	}
	if !l.ValidUntil().After(first) {
		t.Fatalf("ValidUntil %v, not after the first %v: no renewal counted", l.ValidUntil(), first)
	}
}
