package lateproxy

import (
	"bufio"
	"context"
	"errors"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// bound is how long a test waits for something that should happen at once: a hang, not
// a speed, is what it detects.
const bound = 10 * time.Second

// throughProxy returns a go-redis client of s through p that gives up on a reply after
// readTimeout and never retries.
func throughProxy(t *testing.T, s *redistest.Server, p *Proxy, readTimeout time.Duration) *redis.Client {
	t.Helper()
	opts := s.Options()
	opts.Addr = p.Addr
	opts.ReadTimeout = readTimeout
	opts.MaxRetries = -1
	opts.PoolSize = 1
	c := redis.NewClient(opts)
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func waitLanded(t *testing.T, h *Held) {
	t.Helper()
	select {
	case <-h.Landed():
	case <-time.After(bound):
		t.Fatalf("held bytes not landed within %v", bound)
	}
}

// rawConn is a plain connection through the proxy that speaks inline commands.
type rawConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

func dialRaw(t *testing.T, p *Proxy) *rawConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", p.Addr, bound)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nc.Close() })
	return &rawConn{t: t, nc: nc, r: bufio.NewReader(nc)}
}

func (c *rawConn) send(cmd string) {
	c.t.Helper()
	if _, err := c.nc.Write([]byte(cmd + "\r\n")); err != nil {
		c.t.Fatalf("write %q: %v", cmd, err)
	}
}

// line reads one reply line within d.
func (c *rawConn) line(d time.Duration) (string, error) {
	_ = c.nc.SetReadDeadline(time.Now().Add(d))
	s, err := c.r.ReadString('\n')
	return strings.TrimRight(s, "\r\n"), err
}

func (c *rawConn) expect(want string) {
	c.t.Helper()
	got, err := c.line(bound)
	if err != nil || got != want {
		c.t.Fatalf("reply = %q, %v; want %q", got, err, want)
	}
}

// A request held on a connection whose client timed out and closed it reaches the
// server when delivered: the upstream connection outlives the client's.
func TestHeldRequestLandsAfterClientGaveUp(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.Start(t)
	direct := s.Client(t)
	p := New(t, s.Addr)
	c := throughProxy(t, s, p, 200*time.Millisecond)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}

	h := p.HoldConnections()
	err := c.Set(ctx, "k", "v", 0).Err()
	var ne net.Error
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatalf("SET through a held connection: %v, want a timeout", err)
	}
	if h.Len() == 0 {
		t.Fatal("Len = 0 after a SET was held")
	}
	// go-redis dropped the timed-out connection; its next command uses a new one, which
	// passes freely.
	if err := c.Set(ctx, "other", "x", 0).Err(); err != nil {
		t.Fatalf("SET on a connection opened after the hold: %v", err)
	}
	if !h.ClientsClosed() {
		t.Fatal("ClientsClosed = false after go-redis dropped the timed-out connection")
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if n := direct.Exists(ctx, "k").Val(); n != 0 {
		t.Fatal("the held SET reached the server before Deliver")
	}

	h.Deliver()
	waitLanded(t, h)
	if got := direct.Get(ctx, "k").Val(); got != "v" {
		t.Fatalf("after Deliver: GET k = %q, want v", got)
	}
	if h.Len() != 0 {
		t.Fatalf("Len = %d after Deliver", h.Len())
	}
}

// Duplicate runs the held request twice: on its own connection and on a fresh one.
func TestDuplicateDeliversTwice(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.Start(t)
	direct := s.Client(t)
	p := New(t, s.Addr)
	c := throughProxy(t, s, p, 200*time.Millisecond)
	if err := c.Ping(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	h := p.HoldConnections()
	if err := c.Incr(ctx, "n").Err(); err == nil {
		t.Fatal("INCR through a held connection succeeded")
	}
	_ = c.Close()
	h.Duplicate()
	waitLanded(t, h)
	if got, err := direct.Get(ctx, "n").Int(); err != nil || got != 2 {
		t.Fatalf("after Duplicate: GET n = %d, %v; want 2", got, err)
	}
}

// On a connection still open, Deliver sends the held bytes in order before the ones
// sent after it, and the client gets their replies.
func TestDeliverResumesAnOpenConnection(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := New(t, s.Addr)
	c := dialRaw(t, p)
	c.send("PING")
	c.expect("+PONG")

	h := p.HoldConnections()
	if !h.ClientsClosed() {
		t.Fatal("ClientsClosed = false for a held connection that holds nothing")
	}
	c.send("SET a 1")
	c.send("APPEND a 2")
	if got, err := c.line(300 * time.Millisecond); err == nil {
		t.Fatalf("reply %q through a held connection", got)
	}
	if h.ClientsClosed() {
		t.Fatal("ClientsClosed = true with the client connected and bytes held")
	}
	h.Deliver()
	waitLanded(t, h)
	c.expect("+OK")
	c.expect(":2")
	c.send("GET a")
	c.expect("$2")
	c.expect("12")
}

// Discard drops the held bytes: they never reach the server.
func TestDiscardDropsHeldBytes(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.Start(t)
	direct := s.Client(t)
	p := New(t, s.Addr)
	c := dialRaw(t, p)
	c.send("PING")
	c.expect("+PONG")
	h := p.HoldConnections()
	c.send("SET gone 1")
	for h.Len() == 0 {
		time.Sleep(time.Millisecond)
	}
	h.Discard()
	waitLanded(t, h)
	if _, err := c.line(bound); err == nil {
		t.Fatal("a discarded connection answered")
	}
	h.Deliver() // no effect after Discard
	if n := direct.Exists(ctx, "gone").Val(); n != 0 {
		t.Fatal("discarded bytes reached the server")
	}
}

// HoldFor delivers by itself after its duration.
func TestHoldForDeliversLater(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := redistest.Start(t)
	direct := s.Client(t)
	p := New(t, s.Addr)
	c := dialRaw(t, p)
	c.send("PING")
	c.expect("+PONG")
	h := p.HoldFor(100 * time.Millisecond)
	c.send("SET later 1")
	_ = c.nc.Close()
	waitLanded(t, h)
	if got := direct.Get(ctx, "later").Val(); got != "1" {
		t.Fatalf("after HoldFor: GET later = %q, want 1", got)
	}
}

// Cut closes open connections; new ones pass.
func TestCutClosesOpenConnections(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := New(t, s.Addr)
	c := dialRaw(t, p)
	c.send("PING")
	c.expect("+PONG")
	h := p.HoldConnections()
	p.Cut()
	if _, err := c.line(bound); err == nil {
		t.Fatal("a cut connection answered")
	}
	h.Deliver() // the cut connection delivers nothing, and lands at once
	waitLanded(t, h)
	c2 := dialRaw(t, p)
	c2.send("PING")
	c2.expect("+PONG")
}

// DelayReplies holds server-to-client bytes back for at least the delay in force when the
// proxy read them (Replies counts them), also if it is lifted meanwhile.
func TestDelayRepliesDelaysReplies(t *testing.T) {
	t.Parallel()
	s := redistest.Start(t)
	p := New(t, s.Addr)
	c := dialRaw(t, p)
	const d = 300 * time.Millisecond
	p.DelayReplies(d)
	start := time.Now()
	before := p.Replies()
	c.send("PING")
	// Once the proxy counted the reply, lifting the delay no longer releases it early.
	for p.Replies() == before {
		time.Sleep(time.Millisecond)
	}
	p.DelayReplies(0)
	c.expect("+PONG")
	if el := time.Since(start); el < d {
		t.Fatalf("reply after %v, want at least %v", el, d)
	}
	c.send("PING")
	c.expect("+PONG")
}

// Close ends every goroutine of the proxy, with connections held, a HoldFor pending
// and an upstream connection waiting for its held bytes.
func TestCloseLeavesNoGoroutine(t *testing.T) {
	s := redistest.Start(t)
	before := goleak.IgnoreCurrent()
	p, err := Start(s.Addr)
	if err != nil {
		t.Fatal(err)
	}
	c := dialRaw(t, p)
	c.send("PING")
	c.expect("+PONG")
	gone := dialRaw(t, p)
	gone.send("PING")
	gone.expect("+PONG")
	h := p.HoldConnections()
	gone.send("SET x 1")
	_ = gone.nc.Close()
	p.HoldFor(time.Hour)
	c2 := dialRaw(t, p)
	c2.send("PING")
	c2.expect("+PONG")
	_ = c.nc.Close()
	_ = c2.nc.Close()
	if err := p.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := p.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	h.Duplicate() // after Close: nothing, and no goroutine
	waitLanded(t, h)
	goleak.VerifyNone(t, before)
}
