package faultproxy

import (
	"testing"
	"time"
)

// SetJitter is SetLatency with jitter: each chunk of data from upstream is delayed by
// latency plus a uniform random amount in [-jitter, +jitter), both rounded up to whole
// milliseconds, counted from when the proxy read it. Chunks of one connection stay in
// order (a chunk waits for the one before it); those of different connections (and so
// of different proxies) overtake each other. latency <= 0 removes the latency.
func (p *Proxy) SetJitter(tb testing.TB, latency, jitter time.Duration) {
	tb.Helper()
	if latency <= 0 {
		latency, jitter = 0, 0
	}
	p.latency.Store(int64(ceilMillis(latency)))
	p.jitter.Store(int64(ceilMillis(jitter)))
}

// Blackhole makes the proxy swallow everything, both ways, without closing a connection
// or refusing a new one: like a host that vanished from the network, or a server hung
// with its sockets open. Clients see no error, only silence, until their timeouts.
// It lasts until the proxy is stopped by the test's cleanup: the bytes it swallowed are
// gone, so a connection that carried any would be garbage if it were lifted.
func (p *Proxy) Blackhole(tb testing.TB) {
	tb.Helper()
	p.blackhole.Store(true)
}

func ceilMillis(d time.Duration) time.Duration {
	return (max(d, 0) + time.Millisecond - 1) / time.Millisecond * time.Millisecond
}
