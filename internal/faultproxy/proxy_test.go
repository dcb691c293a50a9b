package faultproxy

import (
	"context"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

func TestProxy(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := New(t, s.Addr)
	if !strings.HasPrefix(p.Addr, "127.0.0.1:") || p.Addr == s.Addr {
		t.Fatalf("proxy Addr = %q", p.Addr)
	}
	opts := s.Options()
	opts.Addr = p.Addr
	c := redis.NewClient(opts)
	defer c.Close()

	pingTime := func() time.Duration {
		t.Helper()
		var ds []time.Duration
		for range 5 {
			start := time.Now()
			if err := c.Ping(ctx).Err(); err != nil {
				t.Fatal(err)
			}
			ds = append(ds, time.Since(start))
		}
		slices.Sort(ds)
		return ds[len(ds)/2]
	}

	const latency = 100 * time.Millisecond
	base := pingTime()
	p.SetLatency(t, latency)
	slow := pingTime()
	if slow < latency*9/10 || slow < base+latency/2 {
		t.Fatalf("PING with %v latency took %v (baseline %v)", latency, slow, base)
	}
	p.SetLatency(t, 2*latency) // replaces
	slower := pingTime()
	if slower < slow+latency/2 {
		t.Fatalf("PING with %v latency took %v (with %v: %v)", 2*latency, slower, latency, slow)
	}
	p.SetLatency(t, 0)
	if fast := pingTime(); fast > base+latency/2 {
		t.Fatalf("PING after removing latency took %v (baseline %v)", fast, base)
	}
	t.Logf("PING median: baseline %v, +%v latency %v, +%v latency %v", base, latency, slow, 2*latency, slower)

	p.Cut(t)
	p.Cut(t) // idempotent
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatal("PING through a cut proxy succeeded")
	}
	if conn, err := net.DialTimeout("tcp", p.Addr, time.Second); err == nil {
		conn.Close()
		t.Fatal("a cut proxy accepts connections")
	}
	p.Restore(t)
	p.Restore(t) // idempotent
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatalf("PING after Restore: %v", err)
	}
}
