// Package faultproxy puts a TCP proxy between tests' clients and their servers, to inject
// latency, network cuts and a black hole. It is apart from redistest so that starting a
// redis-server (dlocktest) does not build it into the tests of dlock's users.
//
// It uses the standard library only, because the root go.mod is part of every user's
// module graph: while this package wrapped toxiproxy (in process), `go list -m all` in a
// fresh module that imports dlock and dlocktest printed 34 lines, among them toxiproxy,
// Prometheus's client, zerolog and gorilla/mux; without it (and with the CLI a module of
// its own), 19, of which go-redis's own graph is 11. The few behaviours the tests use
// (delayed replies with jitter, cut and restore, a black hole) take the code below;
// dlocktest's TestAsAUser keeps the graph from growing back.
package faultproxy

import (
	"errors"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

const (
	startAttempts = 5               // tries when the port was taken meanwhile
	dialTimeout   = 5 * time.Second // bounds the dial of an upstream connection
)

// Proxy is a TCP proxy on a free loopback port in front of an upstream address, for
// injecting latency and network cuts. Clients connect to Addr instead of the server.
// Each connection it accepts gets an upstream connection of its own. It is stopped
// (listener and all connections closed) by the Cleanup of the test that created it.
// The methods are safe for concurrent use.
type Proxy struct {
	// Addr is the proxy's listen address, "127.0.0.1:PORT". It stays the
	// same across Cut and Restore.
	Addr string
	// Upstream is the proxied address, as given to New.
	Upstream string

	port      int
	latency   atomic.Int64 // SetJitter's latency, in nanoseconds; 0: none
	jitter    atomic.Int64 // SetJitter's jitter, in nanoseconds
	blackhole atomic.Bool

	mu     sync.Mutex
	ln     net.Listener // nil while cut
	links  map[*link]struct{}
	closed bool
	wg     sync.WaitGroup // every goroutine of the proxy
}

// New starts a proxy to upstream (e.g. a Server's Addr) and returns
// once it accepts connections. It is stopped by tb.Cleanup.
func New(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	var err error
	for range startAttempts {
		var port int
		if port, err = redistest.ReservePort(); err != nil {
			break
		}
		p := &Proxy{Addr: "127.0.0.1:" + strconv.Itoa(port), Upstream: upstream, port: port,
			links: make(map[*link]struct{})}
		if err = p.listen(); err == nil {
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
	p.cut()
}

// Restore listens on Addr again after Cut; configured latency still applies.
// Restoring a proxy that is not cut does nothing. It fails the test if the
// port cannot be had back (another process took it) within about 1 s.
func (p *Proxy) Restore(tb testing.TB) {
	tb.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	for attempt := range startAttempts {
		if p.ln != nil {
			return
		}
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 100 * time.Millisecond)
		}
		if err = p.listenLocked(); err == nil {
			return
		}
	}
	tb.Fatalf("faultproxy: restore proxy %s: %v", p.Addr, err)
}

// cut closes the listener and every connection. Called with p.mu held.
func (p *Proxy) cut() {
	if p.ln != nil {
		_ = p.ln.Close()
		p.ln = nil
	}
	for l := range p.links {
		l.close()
	}
}

func (p *Proxy) cleanup() {
	p.mu.Lock()
	p.closed = true
	p.cut()
	p.mu.Unlock()
	p.wg.Wait()
	redistest.ReleasePort(p.port)
}

func (p *Proxy) listen() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.listenLocked()
}

// listenLocked listens on Addr and starts accepting. Called with p.mu held.
func (p *Proxy) listenLocked() error {
	ln, err := net.Listen("tcp", p.Addr)
	if err != nil {
		return err
	}
	p.ln = ln
	p.wg.Add(1)
	go p.accept(ln)
	return nil
}

// accept serves the connections that ln accepts, until ln is closed.
func (p *Proxy) accept(ln net.Listener) {
	defer p.wg.Done()
	for {
		c, err := ln.Accept()
		if errors.Is(err, net.ErrClosed) {
			return
		}
		if err != nil { // a transient error (EMFILE)
			time.Sleep(10 * time.Millisecond)
			continue
		}
		p.wg.Add(1)
		go p.serve(ln, c)
	}
}
