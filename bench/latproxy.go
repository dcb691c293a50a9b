package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"sync"
	"time"
)

// proxyEnv makes the binary a delay proxy: its value is the proxy's JSON config. The
// proxy runs in a process of its own so that its CPU is not charged to the client whose
// CPU the latency scenarios measure.
//
// Why a proxy of our own: toxiproxy's latency toxic takes whole milliseconds, and the
// scenarios need 0.25 ms each way. Why nanosleep: the Go runtime's timers wake a sleeping
// program through epoll_pwait, whose timeout is in milliseconds, so a time.Sleep of
// 250 µs lasted 1.13 ms on the benchmark machine; nanosleep on a thread with a 1 ns timer
// slack lasted 0.30 ms. Every chunk is held at least the delay from when it was read;
// the wake-ups of the proxy's threads come on top, so the round trip it really adds is
// measured in each run (linkStats) and reported.
const proxyEnv = "DLOCK_BENCH_PROXY"

// proxyConfig is what the parent asks for: one listener per upstream, each direction of
// each connection delayed by Delay.
type proxyConfig struct {
	Delay     time.Duration `json:"delay"`
	Upstreams []string      `json:"upstreams"`
}

// proxyReady is the proxy's first line on stdout: its listeners, in the upstreams' order.
type proxyReady struct {
	Addrs []string `json:"addrs"`
}

// proxyMain runs the delay proxy until stdin ends (the parent closed it, or died).
func proxyMain(spec string, stdin io.Reader, stdout io.Writer) error {
	var cfg proxyConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		return fmt.Errorf("proxy config: %w", err)
	}
	p, err := listenDelayed(cfg)
	if err != nil {
		return err
	}
	defer p.close()
	if err := json.NewEncoder(stdout).Encode(proxyReady{Addrs: p.addrs()}); err != nil {
		return err
	}
	_, _ = io.Copy(io.Discard, stdin)
	return nil
}

// delayedListeners accept connections and relay each to its upstream, delayed.
type delayedListeners struct {
	d   *deliverer
	lns []net.Listener
	wg  sync.WaitGroup

	mu     sync.Mutex // guards conns and closed
	conns  map[*delayedConn]struct{}
	closed bool
}

func listenDelayed(cfg proxyConfig) (*delayedListeners, error) {
	p := &delayedListeners{d: newDeliverer(cfg.Delay), conns: map[*delayedConn]struct{}{}}
	for _, up := range cfg.Upstreams {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			p.close()
			return nil, err
		}
		p.lns = append(p.lns, ln)
		p.wg.Go(func() { p.serve(ln, up) })
	}
	return p, nil
}

func (p *delayedListeners) addrs() []string {
	out := make([]string, len(p.lns))
	for i, ln := range p.lns {
		out[i] = ln.Addr().String()
	}
	return out
}

func (p *delayedListeners) serve(ln net.Listener, upstream string) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return // closed
		}
		up, err := net.DialTimeout("tcp", upstream, 5*time.Second)
		if err != nil {
			c.Close()
			continue
		}
		dc := &delayedConn{a: c, b: up}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			dc.close()
			return
		}
		p.conns[dc] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() {
			dc.relay(p.d)
			p.mu.Lock()
			delete(p.conns, dc)
			p.mu.Unlock()
		})
	}
}

// close stops accepting, closes every connection and waits for their goroutines.
func (p *delayedListeners) close() {
	p.mu.Lock()
	p.closed = true
	for dc := range p.conns {
		dc.close()
	}
	p.mu.Unlock()
	for _, ln := range p.lns {
		ln.Close()
	}
	p.wg.Wait()
	p.d.close()
}

// delayedConn is one relayed connection: a is the client's side, b the upstream's. When
// either direction ends, both sockets are closed.
type delayedConn struct {
	a, b net.Conn
	once sync.Once
}

func (c *delayedConn) close() {
	c.once.Do(func() {
		c.a.Close()
		c.b.Close()
	})
}

// relay copies both directions, each delayed, and returns when both have stopped.
func (c *delayedConn) relay(d *deliverer) {
	var wg sync.WaitGroup
	wg.Go(func() { c.pipe(d, c.b, c.a) })
	wg.Go(func() { c.pipe(d, c.a, c.b) })
	wg.Wait()
}

// chunk is what one read returned, and when it is due to be written on: dst, or, with
// b nil, the end of src, when conn is closed.
type chunk struct {
	at   time.Time
	b    []byte
	dst  net.Conn
	conn *delayedConn
}

// pipe reads src and queues what it reads for dst, delayed; at the end of src, it
// queues the end, so that what was read before is written before both sides close.
func (c *delayedConn) pipe(d *deliverer, dst, src net.Conn) {
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			d.push(chunk{b: append([]byte(nil), buf[:n]...), dst: dst, conn: c})
		}
		if err != nil {
			d.push(chunk{conn: c})
			return
		}
	}
}

// deliverer writes every chunk of every connection when it is due, from one thread: the
// delay is the same for all, so the order of arrival is the order of deadlines, and one
// wake-up delivers every chunk then due. Five requests of a quorum fan-out arrive within
// µs of each other: with a writer thread per direction, five threads woke on two CPUs for
// them, and the floor (linkStats) was 1.87 at 0.25 ms and 1.24 at 1 ms; with one, 1.31
// and 1.11 (one run each).
// A write blocks the others only while the peer's receive buffer is full, and the queue
// has no bound: both are fine for a few requests in flight per connection, which is what
// the quorum scenarios send.
type deliverer struct {
	delay time.Duration
	wake  chan struct{} // a chunk was queued; capacity 1
	stop  chan struct{}
	done  chan struct{}

	closeOnce sync.Once

	mu sync.Mutex // guards q
	q  []chunk    // in order of arrival, so of deadline
}

func newDeliverer(delay time.Duration) *deliverer {
	d := &deliverer{delay: delay, wake: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go d.run()
	return d
}

// push stamps ch with its deadline and queues it. The stamp is taken under mu, so that
// deadlines keep the queue's order.
func (d *deliverer) push(ch chunk) {
	d.mu.Lock()
	ch.at = time.Now().Add(d.delay)
	d.q = append(d.q, ch)
	d.mu.Unlock()
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

func (d *deliverer) run() {
	defer close(d.done)
	// nanosleep blocks this thread, not only the goroutine: lock it, so the fine timer
	// slack set here stays with it (and the thread ends with the goroutine).
	runtime.LockOSThread()
	fineTimerSlack()
	for {
		d.mu.Lock()
		var head time.Time
		if len(d.q) > 0 {
			head = d.q[0].at
		}
		d.mu.Unlock()
		if head.IsZero() {
			select {
			case <-d.wake:
				continue
			case <-d.stop:
				return
			}
		}
		sleepUntil(head)
		for _, ch := range d.due() {
			if ch.b == nil {
				ch.conn.close()
			} else if _, err := ch.dst.Write(ch.b); err != nil {
				ch.conn.close()
			}
		}
	}
}

// due takes the chunks whose time has come off the queue.
func (d *deliverer) due() []chunk {
	now := time.Now()
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for n < len(d.q) && !d.q[n].at.After(now) {
		n++
	}
	out := slices.Clone(d.q[:n])
	clear(d.q[:n]) // let the delivered bytes go
	d.q = d.q[n:]
	return out
}

func (d *deliverer) close() {
	d.closeOnce.Do(func() { close(d.stop) })
	<-d.done
}

// sleepUntil sleeps until t, with nanosleep's precision (see proxyEnv); a sleep cut
// short by a signal sleeps again for what is left.
func sleepUntil(t time.Time) {
	for d := time.Until(t); d > 0; d = time.Until(t) {
		preciseSleep(d)
	}
}

// delayProxy is a running proxy process.
type delayProxy struct {
	cmd   *exec.Cmd
	stdin io.WriteCloser
	addrs []string // one per upstream, in order
}

// startProxy starts this binary as a delay proxy in front of upstreams.
func (b *bench) startProxy(delay time.Duration, upstreams []string) (*delayProxy, error) {
	spec, _ := json.Marshal(proxyConfig{Delay: delay, Upstreams: upstreams})
	cmd := exec.Command(b.self, "-test.run=^$") // the flag: for a test binary
	cmd.Env = append(os.Environ(), proxyEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = sysProcAttr()
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start proxy: %w", err)
	}
	p := &delayProxy{cmd: cmd, stdin: stdin}
	line, err := bufio.NewReader(stdout).ReadBytes('\n')
	var ready proxyReady
	if err == nil {
		err = json.Unmarshal(line, &ready)
	}
	if err == nil && len(ready.Addrs) != len(upstreams) {
		err = fmt.Errorf("%d listeners for %d upstreams", len(ready.Addrs), len(upstreams))
	}
	if err != nil {
		p.stop()
		return nil, fmt.Errorf("proxy not ready: %w", err)
	}
	p.addrs = ready.Addrs
	return p, nil
}

// stop closes the proxy's stdin, which ends it, and kills it if it has not exited soon.
func (p *delayProxy) stop() {
	p.stdin.Close()
	exited := make(chan error, 1)
	go func() { exited <- p.cmd.Wait() }()
	select {
	case <-exited:
	case <-time.After(5 * time.Second):
		_ = p.cmd.Process.Kill()
		<-exited
	}
}
