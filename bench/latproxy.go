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
// slack lasted 0.30 ms. The proxy's actual added round trip is measured in each run
// (linkStats) and reported.
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
	delay time.Duration
	lns   []net.Listener
	wg    sync.WaitGroup

	mu     sync.Mutex // guards conns and closed
	conns  map[*delayedConn]struct{}
	closed bool
}

func listenDelayed(cfg proxyConfig) (*delayedListeners, error) {
	p := &delayedListeners{delay: cfg.Delay, conns: map[*delayedConn]struct{}{}}
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
		dc := &delayedConn{a: c, b: up, done: make(chan struct{})}
		p.mu.Lock()
		if p.closed {
			p.mu.Unlock()
			dc.close()
			return
		}
		p.conns[dc] = struct{}{}
		p.mu.Unlock()
		p.wg.Go(func() {
			dc.relay(p.delay)
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
}

// delayedConn is one relayed connection: a is the client's side, b the upstream's. When
// either direction ends, both sockets are closed (done is closed first, so that no
// goroutine waits on the other).
type delayedConn struct {
	a, b net.Conn
	once sync.Once
	done chan struct{}
}

func (c *delayedConn) close() {
	c.once.Do(func() {
		close(c.done)
		c.a.Close()
		c.b.Close()
	})
}

// relay copies both directions, each delayed, and returns when both have stopped.
func (c *delayedConn) relay(delay time.Duration) {
	var wg sync.WaitGroup
	wg.Go(func() { c.pipe(c.b, c.a, delay) })
	wg.Go(func() { c.pipe(c.a, c.b, delay) })
	wg.Wait()
}

// chunk is what one read returned, and when it may be written on.
type chunk struct {
	at time.Time
	b  []byte
}

// pipe copies src to dst, each read held back until delay after it arrived. The reader
// stamps every chunk and queues it; the writer takes them in order and sleeps until each
// is due, so bytes keep their order and the delay does not add up over chunks in flight.
func (c *delayedConn) pipe(dst, src net.Conn, delay time.Duration) {
	q := make(chan chunk, 1024)
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() {
		defer c.close()
		// nanosleep blocks this thread, not only the goroutine: lock it, so the fine
		// timer slack set here stays with it (and the thread ends with the goroutine).
		runtime.LockOSThread()
		fineTimerSlack()
		for {
			select {
			case ch, ok := <-q:
				if !ok {
					return // src ended: everything read has been written
				}
				sleepUntil(ch.at)
				if _, err := dst.Write(ch.b); err != nil {
					return
				}
			case <-c.done:
				return
			}
		}
	})
	buf := make([]byte, 64<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			ch := chunk{at: time.Now().Add(delay), b: append([]byte(nil), buf[:n]...)}
			select {
			case q <- ch:
			case <-c.done:
				return
			}
		}
		if err != nil {
			close(q)
			return
		}
	}
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
