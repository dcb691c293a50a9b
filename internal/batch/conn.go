package batch

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// conn is one connection of the direct transport, with the FIFO of the flushes written on
// it and not yet fully answered, and the goroutine that reads their replies.
//
// The writer goroutine (direct.run) creates a conn, appends flushes to it (push) and writes
// them; the conn's reader goroutine (read) answers the calls in the order they were written
// and removes each flush when its last reply has arrived. Whoever closes a conn (the writer
// after a failed write, the reader after a failed read, Stop) records why; the reader then
// answers every call still in the FIFO with that error and exits.
type conn struct {
	d    *direct
	nc   net.Conn
	rr   respReader // the reader goroutine's, after the handshake
	gen  uint64     // a number unique within the direct transport: what scriptInfo.loaded refers to
	born time.Time  // read only

	// Owned by the writer goroutine.
	lastUse    time.Time // when the last flush was written
	retireAt   time.Time // ConnMaxLifetime (with its jitter) ends here; zero for never
	writeUntil time.Time // the write deadline currently set on nc

	mu   sync.Mutex
	head *flush        // guarded by mu: the oldest flush not fully answered
	tail *flush        // guarded by mu: the newest flush
	err  error         // guarded by mu: why the conn was closed; nil while it is open
	idle chan struct{} // guarded by mu: closed when the FIFO empties or the conn closes; nil unless waited for

	busy   atomic.Int32 // flushes in the FIFO: replies are on their way
	dead   atomic.Bool  // err is set: the writer must not use the conn any more
	retire atomic.Bool  // the server said READONLY: move on to a new connection (after a failover)
	forget atomic.Bool  // the server said NOSCRIPT: its script cache was flushed
	noLoad atomic.Bool  // the server refused SCRIPT LOAD: rely on EVALSHA and EVAL only
}

// flush is what one write carried: the replies it waits for, in order.
type flush struct {
	entries []entry
	sent    time.Time // when it was written: its replies are late after sent + ReadTimeout
	next    *flush    // the next flush in the conn's FIFO
}

// entry is one command of a flush: a call, or a SCRIPT LOAD (call nil) whose reply is
// consumed by the reader.
type entry struct {
	call *Call
	eval bool // sent with EVAL: NOSCRIPT cannot be its reply
}

var flushPool = sync.Pool{New: func() any { return new(flush) }}

func putFlush(f *flush) {
	clear(f.entries)
	f.entries, f.next = f.entries[:0], nil
	if cap(f.entries) <= 4*maxBatch { // not the entries of a huge SendAll
		flushPool.Put(f)
	}
}

// errRetired closes a connection that the writer has moved on from; no call is answered
// with it, since the writer waits until the connection has answered everything.
var errRetired = errors.New("connection retired")

// errStoppedInFlight answers the calls whose replies had not arrived when Stop gave up
// waiting for them: they were sent, so they may have run.
var errStoppedInFlight = errors.New("dlock: client closed before the reply arrived (the call may have run)")

// connectError is the failure to set up a connection: the dial, the credentials, or a
// command of the handshake. For an error reply from the server the message starts with
// the server's words (WRONGPASS, NOAUTH, NOPERM ...), which is what callers match.
type connectError struct {
	step string // "dial", "credentials", "AUTH", "SELECT 3", "CLIENT SETNAME"
	err  error
}

func (e *connectError) Error() string {
	var re redis.Error
	if errors.As(e.err, &re) {
		return e.err.Error() + " (reply to " + e.step + " on a new connection)"
	}
	if e.step == "dial" {
		return "could not connect: " + e.err.Error()
	}
	return "could not connect: " + e.step + ": " + e.err.Error()
}

func (e *connectError) Unwrap() error { return e.err }

// dial opens, authenticates and sets up a new connection the way go-redis would for the
// same options (RESP2: AUTH, SELECT, CLIENT SETNAME), and starts its reader. Like go-redis'
// pool it tries the dial DialerRetries times, DialerRetryBackoff (or DialerRetryTimeout)
// apart, each try bounded by DialTimeout; the handshake is not retried, and each of its
// replies is bounded by ReadTimeout. Stop (d.ctx) cuts all of it short.
func (d *direct) dial(gen uint64) (*conn, error) {
	opt := d.opt
	nc, err := d.dialRetry()
	if err != nil {
		return nil, &connectError{step: "dial", err: err}
	}
	ctx := d.ctx
	if opt.DialTimeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, opt.DialTimeout)
		defer cancel()
	}
	cn := &conn{
		d:    d,
		nc:   nc,
		rr:   respReader{br: bufio.NewReaderSize(nc, max(opt.ReadBufferSize, 4096))},
		gen:  gen,
		born: time.Now(),
	}
	if err := cn.handshake(ctx); err != nil {
		_ = nc.Close()
		return nil, err
	}
	if opt.ConnMaxLifetime > 0 {
		life := opt.ConnMaxLifetime
		if j := opt.ConnMaxLifetimeJitter; j > 0 {
			life += time.Duration(rand.Int64N(int64(j)))
		}
		cn.retireAt = cn.born.Add(life)
	}
	cn.lastUse = cn.born
	d.readers.Add(1)
	go cn.read()
	return cn, nil
}

// dialRetry calls the Dialer until it succeeds, up to DialerRetries times.
func (d *direct) dialRetry() (net.Conn, error) {
	opt := d.opt
	tries := max(opt.DialerRetries, 1)
	for try := 0; ; try++ {
		ctx, cancel := d.ctx, context.CancelFunc(nil)
		if opt.DialTimeout > 0 {
			ctx, cancel = context.WithTimeout(ctx, opt.DialTimeout)
		}
		nc, err := opt.Dialer(ctx, opt.Network, opt.Addr)
		if cancel != nil {
			cancel()
		}
		if err == nil || try+1 >= tries || d.ctx.Err() != nil {
			return nc, err
		}
		pause := opt.DialerRetryTimeout
		if opt.DialerRetryBackoff != nil {
			pause = max(opt.DialerRetryBackoff(try), 0)
		}
		timer := time.NewTimer(pause)
		select {
		case <-timer.C:
		case <-d.ctx.Done():
			timer.Stop()
			return nil, err
		}
	}
}

// handshake sends AUTH, SELECT and CLIENT SETNAME as the options require, in one write,
// and checks that each replied OK. ctx bounds the credentials provider; the replies are
// bounded by ReadTimeout, and all of it by Stop.
func (cn *conn) handshake(ctx context.Context) error {
	opt := cn.d.opt
	user, pass, err := credentials(ctx, opt)
	if err != nil {
		return &connectError{step: "credentials", err: err}
	}
	var b []byte
	var steps []string
	if pass != "" { // as go-redis: no AUTH without a password
		if user != "" {
			b = appendArrayLen(b, 3)
			b = appendBulk(appendBulk(appendBulk(b, "AUTH"), user), pass)
		} else {
			b = appendArrayLen(b, 2)
			b = appendBulk(appendBulk(b, "AUTH"), pass)
		}
		steps = append(steps, "AUTH")
	}
	if opt.DB > 0 {
		b = appendArrayLen(b, 2)
		b = appendBulkInt(appendBulk(b, "SELECT"), int64(opt.DB))
		steps = append(steps, fmt.Sprintf("SELECT %d", opt.DB))
	}
	if opt.ClientName != "" {
		b = appendArrayLen(b, 3)
		b = appendBulk(appendBulk(appendBulk(b, "CLIENT"), "SETNAME"), opt.ClientName)
		steps = append(steps, "CLIENT SETNAME")
	}
	if len(steps) == 0 {
		return nil
	}
	// Stop closes the connection under a handshake that waits for a hung server.
	stop := context.AfterFunc(cn.d.ctx, func() { _ = cn.nc.Close() })
	defer stop()
	if d := cn.d.wt; d > 0 {
		_ = cn.nc.SetWriteDeadline(time.Now().Add(d))
	}
	if d := cn.d.rt; d > 0 {
		_ = cn.nc.SetReadDeadline(time.Now().Add(d))
	}
	failed := func(step string, err error, writing bool) error {
		if cn.d.ctx.Err() != nil {
			err = ErrStopped // Stop closed the connection
		} else {
			err = cn.ioError(err, writing)
		}
		return &connectError{step: step, err: err}
	}
	if _, err := cn.nc.Write(b); err != nil {
		return failed(steps[0], err, true)
	}
	var rep reply
	for _, step := range steps {
		if err := cn.rr.read(&rep); err != nil {
			return failed(step, err, false)
		}
		switch {
		case rep.kind == kindError:
			return &connectError{step: step, err: replyError(rep.text)}
		case rep.kind != kindStatus:
			return &connectError{step: step, err: fmt.Errorf("unexpected %s", describe(&rep))}
		}
	}
	_ = cn.nc.SetDeadline(time.Time{})
	return nil
}

// credentials are the user and password to authenticate with, chosen as go-redis chooses
// them (Options.resolveCredentials).
func credentials(ctx context.Context, opt *redis.Options) (user, pass string, err error) {
	switch {
	case opt.CredentialsProviderContext != nil:
		return opt.CredentialsProviderContext(ctx)
	case opt.CredentialsProvider != nil:
		user, pass = opt.CredentialsProvider()
		return user, pass, nil
	}
	return opt.Username, opt.Password, nil
}

// ioError says what an I/O error on the connection means; writing tells a failed write
// from a failed read.
func (cn *conn) ioError(err error, writing bool) error {
	var ne net.Error
	switch {
	case errors.Is(err, errProtocol):
		return fmt.Errorf("%w; connection closed", err)
	case errors.As(err, &ne) && ne.Timeout() && writing:
		return fmt.Errorf("could not write within %v (WriteTimeout): the server is hung or not reading; connection closed: %w", cn.d.wt, err)
	case errors.As(err, &ne) && ne.Timeout() && cn.d.rt > 0:
		return fmt.Errorf("no reply within %v (ReadTimeout): the server is hung or overloaded; connection closed: %w", cn.d.rt, err)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return fmt.Errorf("connection closed by the server: %w", err)
	}
	return fmt.Errorf("connection lost: %w", err)
}

// push appends f, about to be written, to the FIFO. It reports false, having done nothing,
// if the conn is closed. Called by the writer goroutine.
func (cn *conn) push(f *flush) bool {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	if cn.err != nil {
		return false
	}
	cn.busy.Add(1)
	if cn.tail == nil {
		cn.head, cn.tail = f, f
		if rt := cn.d.rt; rt > 0 {
			_ = cn.nc.SetReadDeadline(f.sent.Add(rt))
		}
	} else {
		cn.tail.next, cn.tail = f, f
	}
	return true
}

// front returns the oldest flush, or nil. Called by the reader goroutine.
func (cn *conn) front() *flush {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.head
}

// pop removes the oldest flush, fully answered, and returns the next one or nil. The read
// deadline follows the oldest flush still waiting. Called by the reader goroutine.
func (cn *conn) pop() *flush {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	f := cn.head
	cn.head, f.next = f.next, nil
	cn.busy.Add(-1)
	rt := cn.d.rt
	if cn.head == nil {
		cn.tail = nil
		if rt > 0 {
			_ = cn.nc.SetReadDeadline(time.Time{})
		}
		if cn.idle != nil {
			close(cn.idle)
			cn.idle = nil
		}
	} else if rt > 0 {
		_ = cn.nc.SetReadDeadline(cn.head.sent.Add(rt))
	}
	return cn.head
}

// waitIdle waits until the conn has answered every call written on it, or is closed. It
// returns false if stop closed first.
func (cn *conn) waitIdle(stop <-chan struct{}) bool {
	cn.mu.Lock()
	if cn.head == nil || cn.err != nil {
		cn.mu.Unlock()
		return true
	}
	if cn.idle == nil {
		cn.idle = make(chan struct{})
	}
	idle := cn.idle
	cn.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-stop:
		return false
	}
}

// close closes the conn for the given reason, unless it is closed already. The reader
// answers the calls still waiting with err.
func (cn *conn) close(err error) {
	cn.mu.Lock()
	if cn.err == nil {
		cn.err = err
	}
	cn.dead.Store(true)
	cn.mu.Unlock()
	_ = cn.nc.Close()
}

// error returns why the conn was closed, or nil.
func (cn *conn) error() error {
	cn.mu.Lock()
	defer cn.mu.Unlock()
	return cn.err
}

// read is the reader goroutine: it reads replies until the connection fails or is closed,
// answering the calls in the order they were written. Between flushes it waits on the
// socket without a deadline, so that a server that closes an idle connection is noticed
// at once and the next call dials a new one.
func (cn *conn) read() {
	d := cn.d
	defer d.readers.Done()
	var (
		rep      reply
		f        *flush // the oldest flush: the one the next reply belongs to
		i        int    // the entry of f the next reply answers
		answered int    // calls of f answered so far
	)
	for {
		if err := cn.rr.read(&rep); err != nil {
			cn.fail(f, i, answered, cn.ioError(err, false))
			return
		}
		if f == nil {
			if f = cn.front(); f == nil {
				cn.fail(nil, 0, 0, protocolError("a reply with no command waiting for it (%s); connection closed", describe(&rep)))
				return
			}
		}
		e := f.entries[i]
		i++
		var next *flush
		last := i == len(f.entries)
		if last {
			// Off the FIFO before its last call is answered: the writer, seeing nothing in
			// flight, writes that caller's next call at once rather than gathering.
			next = cn.pop()
		}
		switch {
		case e.call == nil: // SCRIPT LOAD
			if rep.kind == kindError {
				// Refused (ACL without SCRIPT): EVALSHA falls back to EVAL, which also
				// caches the script, without asking again on this connection.
				cn.noLoad.Store(true)
			}
		case d.answer(cn, e, &rep):
			answered++
		}
		if last {
			putFlush(f)
			d.release(answered)
			f, i, answered = next, 0, 0
		}
	}
}

// fail closes the conn after a read error and answers every call still waiting with the
// recorded reason: the first of a close's reason and err. cur, i and answered are where the
// reader was in the oldest flush.
func (cn *conn) fail(cur *flush, i, answered int, err error) {
	cn.mu.Lock()
	if cn.err == nil {
		cn.err = err
	}
	err = cn.err
	cn.dead.Store(true)
	list := cn.head
	cn.head, cn.tail = nil, nil
	cn.busy.Store(0)
	if cn.idle != nil {
		close(cn.idle)
		cn.idle = nil
	}
	cn.mu.Unlock()
	_ = cn.nc.Close()
	if errors.Is(err, errRetired) {
		// Defensive: the writer retires a conn only once it has answered everything.
		err = errStoppedInFlight
	}
	n := answered
	for f := list; f != nil; {
		start := 0
		if f == cur {
			start = i
		}
		for _, e := range f.entries[start:] {
			if c := e.call; c != nil {
				c.Val, c.Err = 0, err
				c.Done <- c
				n++
			}
		}
		next := f.next
		putFlush(f)
		f = next
	}
	cn.d.release(n)
}

// answer answers the call of e with rep and reports true, or, for NOSCRIPT, queues it to be
// sent again with EVAL and reports false.
func (d *direct) answer(cn *conn, e entry, rep *reply) bool {
	c := e.call
	switch rep.kind {
	case kindInt:
		c.Val, c.Err = rep.n, nil
	case kindNil:
		c.Val, c.Err = 0, redis.Nil
	case kindError:
		if !e.eval && bytes.HasPrefix(rep.text, []byte("NOSCRIPT")) {
			// The script cache was flushed (SCRIPT FLUSH) since the script was loaded on
			// this connection: the call did not run. It goes out again with EVAL, in a
			// later flush: calls for the same key written after it on this connection
			// (already in flight) run before it. A flush of the script cache on a live
			// server is rare; a restart, the common case, is a new connection, which
			// loads the scripts before their first EVALSHA.
			cn.forget.Store(true)
			d.resendEval(c)
			return false
		}
		if bytes.HasPrefix(rep.text, []byte("READONLY")) {
			cn.retire.Store(true) // a failed-over master, demoted to a replica
		}
		c.Val, c.Err = 0, replyError(rep.text)
	default:
		verb := "EVALSHA"
		if e.eval {
			verb = "EVAL"
		}
		c.Val, c.Err = 0, fmt.Errorf("dlock: unexpected %s to %s (dlock's scripts reply with an integer, nil or an error)", describe(rep), verb)
	}
	c.Done <- c
	return true
}
