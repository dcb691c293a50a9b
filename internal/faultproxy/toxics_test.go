package faultproxy

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

func TestProxyJitterAndBlackhole(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := New(t, s.Addr)
	opts := s.Options()
	opts.Addr = p.Addr
	opts.ReadTimeout = 300 * time.Millisecond
	opts.MaxRetries = -1
	c := redis.NewClient(opts)
	defer c.Close()

	const latency, jitter = 40 * time.Millisecond, 20 * time.Millisecond
	p.SetJitter(t, latency, jitter)
	for range 5 {
		start := time.Now()
		if err := c.Ping(ctx).Err(); err != nil {
			t.Fatal(err)
		}
		if d := time.Since(start); d < latency-jitter {
			t.Fatalf("PING with %v±%v latency took %v", latency, jitter, d)
		}
	}
	p.SetJitter(t, 0, 0)

	p.Blackhole(t)
	p.Blackhole(t) // twice is once
	start := time.Now()
	if err := c.Ping(ctx).Err(); err == nil {
		t.Fatalf("PING through a blackholed proxy answered")
	}
	if d := time.Since(start); d < opts.ReadTimeout {
		t.Fatalf("PING through a blackholed proxy failed after %v, before the read timeout: the proxy closed or refused", d)
	}
}
