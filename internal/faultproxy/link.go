package faultproxy

import (
	"math/rand/v2"
	"net"
	"sync"
	"time"
)

const (
	bufSize     = 32 << 10 // the size of each read
	queuedReads = 1024     // reads from upstream waiting for their latency
)

// link is one client connection and its upstream connection.
type link struct {
	client, up net.Conn
	done       chan struct{} // closed by close
	once       sync.Once
}

// chunk is data read from upstream, due to the client at a time.
type chunk struct {
	data []byte
	due  time.Time
}

func (l *link) close() {
	l.once.Do(func() {
		close(l.done)
		_ = l.client.Close()
		_ = l.up.Close()
	})
}

// serve connects client to upstream and forwards both ways until either side closes or
// the proxy is cut. ln is the listener that accepted client: a client accepted just
// before a cut is closed, not served.
func (p *Proxy) serve(ln net.Listener, client net.Conn) {
	defer p.wg.Done()
	up, err := net.DialTimeout("tcp", p.Upstream, dialTimeout)
	if err != nil {
		_ = client.Close()
		return
	}
	l := &link{client: client, up: up, done: make(chan struct{})}
	p.mu.Lock()
	if p.closed || p.ln != ln {
		p.mu.Unlock()
		l.close()
		return
	}
	p.links[l] = struct{}{}
	p.wg.Add(2)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		delete(p.links, l)
		p.mu.Unlock()
	}()
	queue := make(chan chunk, queuedReads)
	go p.readReplies(l, queue)
	go p.writeReplies(l, queue)
	p.forward(l)
}

// forward copies the client's bytes upstream (nowhere under Blackhole); it closes the
// link when the client closes.
func (p *Proxy) forward(l *link) {
	defer l.close()
	buf := make([]byte, bufSize)
	for {
		n, err := l.client.Read(buf)
		if n > 0 && !p.blackhole.Load() {
			if _, werr := l.up.Write(buf[:n]); werr != nil {
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// readReplies reads upstream's bytes into queue, each read due after the latency of the
// moment it was read; it closes queue when upstream closes.
func (p *Proxy) readReplies(l *link, queue chan<- chunk) {
	defer p.wg.Done()
	defer close(queue)
	buf := make([]byte, bufSize)
	for {
		n, err := l.up.Read(buf)
		if n > 0 {
			c := chunk{data: append([]byte(nil), buf[:n]...), due: time.Now().Add(p.delay())}
			select {
			case queue <- c:
			case <-l.done:
				return
			}
		}
		if err != nil {
			return
		}
	}
}

// writeReplies writes the chunks of queue to the client in order, each once due (nowhere
// under Blackhole); it closes the link once upstream has closed and the chunks are out.
func (p *Proxy) writeReplies(l *link, queue <-chan chunk) {
	defer p.wg.Done()
	defer l.close()
	for c := range queue {
		if wait := time.Until(c.due); wait > 0 {
			t := time.NewTimer(wait)
			select {
			case <-t.C:
			case <-l.done:
				t.Stop()
				return
			}
		}
		if p.blackhole.Load() {
			continue
		}
		if _, err := l.client.Write(c.data); err != nil {
			return
		}
	}
}

// delay is the latency for data read now: SetJitter's latency plus a uniform random
// amount in [-jitter, +jitter), at least 0.
func (p *Proxy) delay() time.Duration {
	d := time.Duration(p.latency.Load())
	if j := p.jitter.Load(); d > 0 && j > 0 {
		d += time.Duration(rand.Int64N(2*j) - j)
	}
	return max(d, 0)
}
