// Package faultproxy puts a TCP proxy (toxiproxy, in process) between tests' clients and
// their servers, to inject latency and network cuts. It is apart from redistest so that
// starting a redis-server (dlocktest) does not pull toxiproxy and its dependencies into
// the builds of dlock's users.
package faultproxy

import (
	"errors"
	"strconv"
	"sync"
	"testing"
	"time"

	toxiproxy "github.com/Shopify/toxiproxy/v2"
	"github.com/rs/zerolog"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

const (
	latencyToxicName = "faultproxy_latency"
	startAttempts    = 5 // tries when the port was taken meanwhile
)

// Proxy is a TCP proxy (toxiproxy, in process) on a free loopback port in
// front of an upstream address, for injecting latency and network cuts.
// Clients connect to Addr instead of the server. It is stopped (listener and
// all connections closed) by the Cleanup of the test that created it. The
// methods are safe for concurrent use.
type Proxy struct {
	// Addr is the proxy's listen address, "127.0.0.1:PORT". It stays the
	// same across Cut and Restore.
	Addr string
	// Upstream is the proxied address, as given to New.
	Upstream string

	mu      sync.Mutex
	tp      *toxiproxy.Proxy
	port    int
	latency bool // the latency toxic is installed
}

// New starts a proxy to upstream (e.g. a Server's Addr) and returns
// once it accepts connections. It is stopped by tb.Cleanup.
func New(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	api := toxiproxy.NewServer(toxiproxy.NewMetricsContainer(nil), zerolog.Nop())
	var err error
	for range startAttempts {
		var port int
		if port, err = redistest.ReservePort(); err != nil {
			break
		}
		addr := "127.0.0.1:" + strconv.Itoa(port)
		tp := toxiproxy.NewProxy(api, "faultproxy-"+strconv.Itoa(port), addr, upstream)
		if err = tp.Start(); err == nil {
			p := &Proxy{Addr: addr, Upstream: upstream, tp: tp, port: port}
			tb.Cleanup(p.cleanup)
			return p
		}
		redistest.ReleasePort(port)
	}
	tb.Fatalf("faultproxy: start proxy to %s: %v", upstream, err)
	return nil
}

// SetLatency delays all data from upstream to the client (the downstream
// direction only) by d, rounded up to whole milliseconds, so each
// request/response round trip takes at least d longer. It applies to open
// connections as well as new ones; a later call replaces the value, and
// d <= 0 removes the latency.
func (p *Proxy) SetLatency(tb testing.TB, d time.Duration) {
	tb.Helper()
	p.SetJitter(tb, d, 0)
}

// Cut stops forwarding: open connections are closed and new ones refused
// (the listener is closed). Restore undoes it. Cutting a cut proxy does
// nothing.
func (p *Proxy) Cut(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tp.Stop()
}

// Restore listens on Addr again after Cut; configured latency still applies.
// Restoring a proxy that is not cut does nothing. It fails the test if the
// port cannot be had back (another process took it) within about 2 s.
func (p *Proxy) Restore(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	for attempt := range startAttempts {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
		}
		if err = p.tp.Start(); err == nil || errors.Is(err, toxiproxy.ErrProxyAlreadyStarted) {
			return
		}
	}
	tb.Fatalf("faultproxy: restore proxy %s: %v", p.Addr, err)
}

func (p *Proxy) cleanup() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.tp.Stop()
	redistest.ReleasePort(p.port)
}
