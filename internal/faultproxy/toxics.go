package faultproxy

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"
)

// blackholeToxics name the two toxics of Blackhole, one per direction.
var blackholeToxics = [2]string{"faultproxy_blackhole_up", "faultproxy_blackhole_down"}

// SetJitter is SetLatency with jitter: each chunk of data from upstream is delayed by
// latency plus a uniform random amount in (-jitter, +jitter), both rounded up to whole
// milliseconds. Chunks of one connection stay in order; those of different connections
// (and so of different proxies) overtake each other. latency <= 0 removes the latency.
func (p *Proxy) SetJitter(tb testing.TB, latency, jitter time.Duration) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	// Replace rather than update in place: toxiproxy's UpdateToxicJson
	// rewrites the toxic's fields while its pipes read them (a data race).
	if p.latency {
		if err := p.tp.Toxics.RemoveToxic(context.Background(), latencyToxicName); err != nil {
			tb.Fatalf("faultproxy: proxy %s: remove latency: %v", p.Addr, err)
		}
		p.latency = false
	}
	if latency <= 0 {
		return
	}
	body := fmt.Sprintf(`{"name":%q,"type":"latency","stream":"downstream","toxicity":1,"attributes":{"latency":%d,"jitter":%d}}`,
		latencyToxicName, ceilMillis(latency), ceilMillis(jitter))
	if _, err := p.tp.Toxics.AddToxicJson(strings.NewReader(body)); err != nil {
		tb.Fatalf("faultproxy: proxy %s: add latency: %v", p.Addr, err)
	}
	p.latency = true
}

// Blackhole makes the proxy swallow everything, both ways, without closing a connection
// or refusing a new one: like a host that vanished from the network, or a server hung
// with its sockets open. Clients see no error, only silence, until their timeouts.
// It lasts until the proxy is stopped by the test's cleanup: the bytes it swallowed are
// gone, so a connection that carried any would be garbage if it were lifted.
func (p *Proxy) Blackhole(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, stream := range [2]string{"upstream", "downstream"} {
		body := fmt.Sprintf(`{"name":%q,"type":"timeout","stream":%q,"toxicity":1,"attributes":{"timeout":0}}`,
			blackholeToxics[i], stream)
		if _, err := p.tp.Toxics.AddToxicJson(strings.NewReader(body)); err != nil && !strings.Contains(err.Error(), "already exists") {
			tb.Fatalf("faultproxy: proxy %s: blackhole: %v", p.Addr, err)
		}
	}
}

func ceilMillis(d time.Duration) int64 {
	return int64((max(d, 0) + time.Millisecond - 1) / time.Millisecond)
}
