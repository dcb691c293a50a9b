// Package lateproxy is a TCP proxy for injecting late delivery: bytes a client sent are
// held back by the proxy and delivered to the server later, after the client gave up
// on them and even after it closed its connection, as a retransmitted TCP segment or a
// pipeline resent on a new connection can be. It uses the standard library only, so
// that tests and the fault suite's agent processes can use it without adding to the
// module's dependencies.
//
// A Proxy listens on a loopback port and opens one upstream connection for each client
// connection it accepts, copying bytes both ways. HoldConnections holds back the
// client-to-server bytes of the connections open at that moment; the returned Held
// delivers them (Deliver, Duplicate) or drops them (Discard). Because an upstream
// connection whose client has gone stays open until its held bytes are delivered, a
// request reaches the server after its caller's timeout has fired.
package lateproxy

import (
	"errors"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// dialTimeout bounds the dial of an upstream connection.
const dialTimeout = 5 * time.Second

// bufSize is the size of each copy buffer.
const bufSize = 32 << 10

// Proxy is a TCP proxy on a loopback port in front of an upstream address. Clients
// connect to Addr instead of the upstream. Its methods are safe for concurrent use.
type Proxy struct {
	// Addr is the proxy's listen address, "127.0.0.1:PORT".
	Addr string
	// Upstream is the proxied address, as given to Start or New.
	Upstream string

	ln         net.Listener
	replyDelay atomic.Int64 // DelayReplies, in nanoseconds
	replies    atomic.Int64 // chunks of server-to-client bytes read (Replies)
	done       chan struct{}

	mu     sync.Mutex
	closed bool
	conns  map[*conn]struct{}
	extra  map[net.Conn]struct{} // upstream connections of Duplicate
	timers map[*time.Timer]struct{}
	wg     sync.WaitGroup // every goroutine the proxy started
}

// Start starts a proxy to upstream on a free port of 127.0.0.1 and returns once it
// accepts connections. On error nothing is left running. Close stops it.
func Start(upstream string) (*Proxy, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	p := &Proxy{
		Addr:     ln.Addr().String(),
		Upstream: upstream,
		ln:       ln,
		done:     make(chan struct{}),
		conns:    make(map[*conn]struct{}),
		extra:    make(map[net.Conn]struct{}),
		timers:   make(map[*time.Timer]struct{}),
	}
	p.wg.Add(1)
	go p.accept()
	return p, nil
}

// New is Start for a test: it fails tb if the proxy cannot start, and the proxy is
// closed by tb.Cleanup.
func New(tb testing.TB, upstream string) *Proxy {
	tb.Helper()
	p, err := Start(upstream)
	if err != nil {
		tb.Fatalf("lateproxy: start proxy to %s: %v", upstream, err)
	}
	tb.Cleanup(func() { _ = p.Close() })
	return p
}

// Close stops the proxy: it closes the listener and every connection (held bytes not
// yet delivered are dropped), stops pending HoldFor deliveries, and returns once every
// goroutine of the proxy has ended. Closing a closed proxy does nothing and returns nil.
func (p *Proxy) Close() error {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil
	}
	p.closed = true
	close(p.done)
	err := p.ln.Close()
	for c := range p.conns {
		c.close()
	}
	for nc := range p.extra {
		_ = nc.Close()
	}
	for tm := range p.timers {
		tm.Stop()
	}
	p.mu.Unlock()
	p.wg.Wait()
	return err
}

// Cut closes every connection open now, client and upstream sides, as a network cut
// would; bytes held on them are dropped (a Held of them delivers nothing). The proxy
// keeps accepting new connections.
func (p *Proxy) Cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.close()
	}
	for nc := range p.extra {
		_ = nc.Close()
	}
}

// DelayReplies delays every chunk of server-to-client bytes by at least d, on open
// connections and new ones; d <= 0 removes the delay. The delay counts from when the
// proxy read the chunk, and chunks of one connection stay in order, so a chunk read
// while an earlier one waits may wait longer than d.
func (p *Proxy) DelayReplies(d time.Duration) {
	p.replyDelay.Store(int64(max(d, 0)))
}

// Replies returns how many chunks of server-to-client bytes the proxy has read so far, on
// every connection. A chunk is counted once the delay of DelayReplies in force when it was
// read applies to it: a test that lifts a delay after Replies grew knows that the reply it
// waited for is held.
func (p *Proxy) Replies() int64 { return p.replies.Load() }

// HoldConnections holds back, from now on, the client-to-server bytes of every
// connection open at this moment, including bytes the client sends later on them; they
// are buffered, not forwarded. Connections opened afterwards pass freely, and so do
// connections already held by an earlier Held (they stay with it), and server-to-client
// bytes. If a client closes a held connection, its upstream connection stays open until
// the Held delivers or drops its bytes.
//
// The returned Held must be ended with Deliver, Duplicate or Discard, or by Close.
func (p *Proxy) HoldConnections() *Held {
	h := &Held{p: p, landed: make(chan struct{})}
	p.mu.Lock()
	defer p.mu.Unlock()
	for c := range p.conns {
		c.mu.Lock()
		if c.held == nil && !c.clientGone && !c.ended {
			c.held = h
			h.conns = append(h.conns, c)
		}
		c.mu.Unlock()
	}
	return h
}

// HoldFor is HoldConnections followed by Deliver after d, unless the Held was ended
// before (or the proxy closed).
func (p *Proxy) HoldFor(d time.Duration) *Held {
	h := p.HoldConnections()
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return h
	}
	var tm *time.Timer
	tm = time.AfterFunc(d, func() {
		p.mu.Lock()
		delete(p.timers, tm)
		if p.closed {
			p.mu.Unlock()
			return
		}
		p.wg.Add(1)
		p.mu.Unlock()
		defer p.wg.Done()
		h.Deliver()
	})
	p.timers[tm] = struct{}{}
	return h
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		cc, err := p.ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			select {
			case <-p.done:
				return
			case <-time.After(10 * time.Millisecond): // a transient error (EMFILE)
			}
			continue
		}
		up, err := net.DialTimeout("tcp", p.Upstream, dialTimeout)
		if err != nil {
			_ = cc.Close()
			continue
		}
		c := &conn{p: p, client: cc, up: up}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			c.close()
			return
		}
		p.conns[c] = struct{}{}
		p.wg.Add(2)
		p.mu.Unlock()
		go c.forward()
		go c.reply()
	}
}

// conn is one client connection and its upstream connection.
type conn struct {
	p      *Proxy
	client net.Conn
	up     net.Conn

	mu         sync.Mutex
	held       *Held    // the Held holding the client-to-server bytes, or nil
	buf        []byte   // the bytes held
	clientGone bool     // the client-to-server direction has ended
	ended      bool     // the server-to-client direction has ended: the conn is closed
	onReply    []func() // called at the next upstream read, or at the end
}

// close closes both sides; the pumps then end.
func (c *conn) close() {
	_ = c.client.Close()
	_ = c.up.Close()
}

// shutUp ends the upstream direction: the server sees end of file after the bytes
// written so far, runs them, and closes, which ends the conn. Called with c.mu held.
func (c *conn) shutUp() {
	if tc, ok := c.up.(*net.TCPConn); ok {
		if tc.CloseWrite() == nil {
			return
		}
	}
	_ = c.up.Close()
}

// forward copies client-to-server bytes, or buffers them while held.
func (c *conn) forward() {
	defer c.p.wg.Done()
	buf := make([]byte, bufSize)
	for {
		n, err := c.client.Read(buf)
		if n > 0 {
			c.mu.Lock()
			if c.held != nil {
				c.buf = append(c.buf, buf[:n]...)
				c.mu.Unlock()
			} else {
				_, werr := c.up.Write(buf[:n])
				c.mu.Unlock()
				if werr != nil {
					c.close()
					return
				}
			}
		}
		if err != nil {
			c.mu.Lock()
			c.clientGone = true
			if c.held == nil {
				c.shutUp()
			}
			c.mu.Unlock()
			return
		}
	}
}

// reply copies server-to-client bytes (after DelayReplies), and discards them once the
// client is gone; it ends the conn when the server closes.
func (c *conn) reply() {
	defer c.p.wg.Done()
	buf := make([]byte, bufSize)
	clientDead := false
	for {
		n, err := c.up.Read(buf)
		if n > 0 {
			c.mu.Lock()
			calls := c.onReply
			c.onReply = nil
			c.mu.Unlock()
			for _, f := range calls {
				f()
			}
			d := time.Duration(c.p.replyDelay.Load())
			c.p.replies.Add(1)
			if d > 0 {
				tm := time.NewTimer(d)
				select {
				case <-tm.C:
				case <-c.p.done:
					tm.Stop()
				}
			}
			if !clientDead {
				if _, werr := c.client.Write(buf[:n]); werr != nil {
					clientDead = true
				}
			}
		}
		if err != nil {
			c.mu.Lock()
			c.ended = true
			calls := c.onReply
			c.onReply = nil
			c.buf = nil
			c.mu.Unlock()
			c.close()
			c.p.mu.Lock()
			delete(c.p.conns, c)
			c.p.mu.Unlock()
			for _, f := range calls {
				f()
			}
			return
		}
	}
}

// Held is the client-to-server bytes that HoldConnections holds back on a set of
// connections. Its methods are safe for concurrent use; only the first call of
// Deliver, Duplicate or Discard has an effect.
type Held struct {
	p      *Proxy
	conns  []*conn
	once   sync.Once
	landed chan struct{}

	mu      sync.Mutex
	pending int // deliveries not yet landed
}

// Len returns the number of bytes held now, summed over the connections; 0 once the
// Held has been ended.
func (h *Held) Len() int {
	n := 0
	for _, c := range h.conns {
		c.mu.Lock()
		if c.held == h {
			n += len(c.buf)
		}
		c.mu.Unlock()
	}
	return n
}

// ClientsClosed reports whether the client of every held connection that holds bytes has
// closed it (or the connection has ended), so that delivered bytes land after their
// callers gave up. A held connection with nothing held, such as an idle one of another
// pool of the client's (go-redis keeps one for pipelines), does not count.
func (h *Held) ClientsClosed() bool {
	for _, c := range h.conns {
		c.mu.Lock()
		gone := c.clientGone || c.ended || len(c.buf) == 0
		c.mu.Unlock()
		if !gone {
			return false
		}
	}
	return true
}

// Deliver writes the held bytes of each connection to its upstream connection and
// resumes forwarding. For a connection whose client has closed, the upstream side is
// then shut down for writing, so that the server runs the bytes and closes; its replies
// are read and discarded. A connection cut or closed meanwhile delivers nothing.
// Deliver returns once the bytes are written, not run: Landed says when they were.
func (h *Held) Deliver() { h.end(false, false) }

// Duplicate is Deliver, and also writes each connection's held bytes to a fresh
// upstream connection (shut down for writing right after, its replies discarded), as a
// pipeline resent on a new connection is. The fresh connection carries no handshake
// (AUTH, HELLO, SELECT) and starts where the hold did: a hold that began in the middle
// of a command gives the server a protocol error there.
func (h *Held) Duplicate() { h.end(true, false) }

// Discard drops the held bytes and closes the held connections, as if the bytes had
// been lost. Landed is closed once they have ended.
func (h *Held) Discard() { h.end(false, true) }

// Landed returns a channel closed once the bytes delivered by Deliver or Duplicate have
// landed: for each connection whose client had gone, and for each fresh connection of
// Duplicate, once the server has closed it, after running every delivered command; for
// a connection still open, once the server has sent anything after the delivery (its
// first reply). Connections that held no bytes land at once, and so do connections
// cut or closed (Cut, Close) before they landed. It is never closed before Deliver,
// Duplicate or Discard is called.
func (h *Held) Landed() <-chan struct{} { return h.landed }

func (h *Held) end(dup, discard bool) {
	h.once.Do(func() {
		h.mu.Lock()
		h.pending = 1 // this call's own count, so Landed waits for the loop below
		h.mu.Unlock()
		for _, c := range h.conns {
			if data := h.endConn(c, discard); dup && len(data) > 0 {
				h.duplicate(data)
			}
		}
		h.landedOne()
	})
}

// endConn ends the hold of c: it delivers the held bytes, or with discard drops them
// and closes c. It returns the bytes that were held.
func (h *Held) endConn(c *conn, discard bool) []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	data := c.buf
	c.buf = nil
	c.held = nil
	if c.ended {
		return data
	}
	if discard {
		h.wait(c)
		c.close()
		return data
	}
	if len(data) > 0 {
		h.wait(c)
		if _, err := c.up.Write(data); err != nil {
			c.close()
		}
	}
	if c.clientGone {
		c.shutUp()
	}
	return data
}

// wait counts a landing on c: its next reply, or its end. Called with c.mu held.
func (h *Held) wait(c *conn) {
	h.mu.Lock()
	h.pending++
	h.mu.Unlock()
	c.onReply = append(c.onReply, h.landedOne)
}

func (h *Held) landedOne() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.pending--
	if h.pending == 0 {
		close(h.landed)
	}
}

// duplicate writes data to a fresh upstream connection in the background.
func (h *Held) duplicate(data []byte) {
	p := h.p
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return
	}
	h.mu.Lock()
	h.pending++
	h.mu.Unlock()
	p.wg.Add(1)
	p.mu.Unlock()
	go func() {
		defer p.wg.Done()
		defer h.landedOne()
		up, err := net.DialTimeout("tcp", p.Upstream, dialTimeout)
		if err != nil {
			return
		}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			_ = up.Close()
			return
		}
		p.extra[up] = struct{}{}
		p.mu.Unlock()
		defer func() {
			p.mu.Lock()
			delete(p.extra, up)
			p.mu.Unlock()
			_ = up.Close()
		}()
		if _, err := up.Write(data); err != nil {
			return
		}
		if tc, ok := up.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		_, _ = io.Copy(io.Discard, up)
	}()
}
