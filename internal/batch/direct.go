package batch

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// maxPending bounds the calls that Send and TrySend let wait for one node (queued, being
// written, or written and not yet answered): beyond it, a hung server under load makes
// Send wait and TrySend refuse instead of queueing without end.
const maxPending = 4096

// Dial backoff: after a failed dial, calls fail at once with the dial's error until the
// backoff has passed, so that a dead server is not dialled for every call.
const (
	minBackoff = 20 * time.Millisecond
	maxBackoff = 500 * time.Millisecond
)

// defaultStopWait bounds how long Stop waits for the replies in flight when the client
// has no ReadTimeout.
const defaultStopWait = 3 * time.Second

// maxKeepBuf is the largest write buffer kept for the next flush; one grown by a huge
// SendAll is dropped after use.
const maxKeepBuf = 1 << 20

// direct is the transport of a *redis.Client: one connection of its own to the server,
// auto-pipelined. Send appends a call to the queue; one writer goroutine takes everything
// queued, encodes it into one buffer, appends it to the connection's FIFO and writes it
// with one syscall, without waiting for the replies of earlier writes; the connection's
// reader goroutine answers the calls in order as the replies come in. One connection, one
// FIFO: a call is written, and run by the server, after every call queued before it.
type direct struct {
	opt      *redis.Options // the go-redis client's options; read only
	rt, wt   time.Duration  // ReadTimeout and WriteTimeout as go-redis applies them; 0: none
	stopWait time.Duration  // how long Stop waits for replies in flight

	ctx    context.Context // cancelled by Stop: cuts short a dial or handshake
	cancel context.CancelFunc

	mu       sync.Mutex
	queued   []*Call       // guarded by mu: calls for the writer, in the order they came
	resend   []*Call       // guarded by mu: calls to send again with EVAL (NOSCRIPT), ahead of queued
	together int           // guarded by mu: the writer takes at least this many of queued at once (SendAll)
	pending  int           // guarded by mu: calls accepted and not yet answered
	stopped  bool          // guarded by mu: Stop has begun; nothing more is accepted
	room     chan struct{} // guarded by mu: closed when pending drops below maxPending; nil unless a Send waits

	wake       chan struct{} // capacity 1: the queue is no longer empty
	stopping   chan struct{} // closed by Stop
	writerDone chan struct{} // closed when the writer goroutine has exited
	readers    sync.WaitGroup
	stopOnce   sync.Once

	// cn is the current connection. The writer sets it (under cnMu) and reads it without
	// that lock; Stop reads it under cnMu.
	cnMu sync.Mutex
	cn   *conn

	// writeMu is held by whoever writes: the writer goroutine, or a caller that found the
	// connection idle and writes its call itself (writeNow), which saves the wake-up of the
	// writer goroutine on every call of a lone caller. It guards cn's replacement and the
	// fields below.
	writeMu sync.Mutex

	// Owned by the holder of writeMu.
	scripts     []*scriptInfo
	gen         uint64 // of the last connection dialled
	buf         []byte // the flush being encoded
	spare       []*Call
	spareResend []*Call
	failures    int       // dials failed in a row
	retryAt     time.Time // no dial before then
	dialErr     error     // the last dial's error, the answer until retryAt

	// Counters, for tests and benchmarks: writes of flushes, and the calls they carried.
	flushes, written atomic.Int64
}

// scriptInfo is what the writer knows about one script.
type scriptInfo struct {
	script   *redis.Script
	sha, src string
	loaded   uint64 // the gen of the connection it was last loaded on; 0 for none
}

// directOptions reports why the options of a go-redis client cannot be honoured by the
// direct transport, or "" if they can.
func directOptions(opt *redis.Options) string {
	switch {
	case opt.Dialer == nil:
		return "no Dialer"
	case opt.StreamingCredentialsProvider != nil:
		return "StreamingCredentialsProvider re-authenticates connections"
	case opt.OnConnect != nil:
		return "OnConnect takes a go-redis connection"
	case opt.Limiter != nil:
		return "Limiter"
	}
	// Not read: MaintNotificationsConfig, whose Mode go-redis rewrites under a lock of its
	// own. The direct transport speaks RESP2 and takes no part in maintenance hand-offs; a
	// connection the server moves or closes is noticed by the reader and redialled.
	return ""
}

func newDirect(opt *redis.Options) *direct {
	d := &direct{
		opt:        opt,
		stopWait:   defaultStopWait,
		wake:       make(chan struct{}, 1),
		stopping:   make(chan struct{}),
		writerDone: make(chan struct{}),
	}
	// After go-redis' defaults: -1 (no deadline) or 0 (block) mean no timeout.
	if opt.ReadTimeout > 0 {
		d.rt = opt.ReadTimeout
		d.stopWait = d.rt
	}
	if opt.WriteTimeout > 0 {
		d.wt = opt.WriteTimeout
	}
	d.ctx, d.cancel = context.WithCancel(context.Background())
	go d.run()
	return d
}

// send queues c; see Batcher.Send and TrySend.
func (d *direct) send(c *Call, wait bool) bool {
	d.mu.Lock()
	for d.pending >= maxPending && !d.stopped {
		if !wait {
			d.mu.Unlock()
			return false
		}
		if d.room == nil {
			d.room = make(chan struct{})
		}
		room := d.room
		d.mu.Unlock()
		if !waitRoom(room, c.Deadline) {
			c.Err = errExpired
			c.Done <- c
			return true
		}
		d.mu.Lock()
	}
	if d.stopped {
		d.mu.Unlock()
		return false
	}
	d.pending++
	wake := len(d.queued) == 0 && len(d.resend) == 0
	d.queued = append(d.queued, c)
	d.mu.Unlock()
	if wake && !d.writeNow() {
		d.signal()
	}
	return true
}

// writeNow writes what is queued from the caller's goroutine if the connection is up and
// idle (no replies on their way, so the write cannot block on a full socket buffer, and
// there is nothing to gather), and reports whether it did. It never dials: that is the
// writer's job, which Send must not wait for.
func (d *direct) writeNow() bool {
	if !d.writeMu.TryLock() {
		return false
	}
	defer d.writeMu.Unlock()
	cn := d.cn
	if cn == nil || cn.busy.Load() > 0 || cn.dead.Load() || cn.retire.Load() || d.isStopping() {
		return false
	}
	now := time.Now()
	if (d.opt.ConnMaxIdleTime > 0 && now.Sub(cn.lastUse) > d.opt.ConnMaxIdleTime) ||
		(!cn.retireAt.IsZero() && now.After(cn.retireAt)) {
		return false // to be replaced: the writer does it
	}
	d.writeQueued(false)
	return true
}

// waitRoom waits for room to close, and reports false if deadline came first.
func waitRoom(room <-chan struct{}, deadline time.Time) bool {
	if deadline.IsZero() {
		<-room
		return true
	}
	timer := time.NewTimer(time.Until(deadline))
	defer timer.Stop()
	select {
	case <-room:
		return true
	case <-timer.C:
		return false
	}
}

// sendAll queues calls at once, to go out in one write; see Batcher.SendAll.
func (d *direct) sendAll(calls []*Call) {
	d.mu.Lock()
	if d.stopped {
		d.mu.Unlock()
		answerAll(calls, ErrStopped)
		return
	}
	d.pending += len(calls)
	wake := len(d.queued) == 0 && len(d.resend) == 0
	d.queued = append(d.queued, calls...)
	d.together = len(d.queued)
	d.mu.Unlock()
	if wake {
		d.signal()
	}
}

// resendEval queues c, answered NOSCRIPT, to be sent again with EVAL.
func (d *direct) resendEval(c *Call) {
	d.mu.Lock()
	wake := len(d.queued) == 0 && len(d.resend) == 0
	d.resend = append(d.resend, c)
	d.mu.Unlock()
	if wake {
		d.signal()
	}
}

func (d *direct) signal() {
	select {
	case d.wake <- struct{}{}:
	default:
	}
}

// release records that n calls have been answered.
func (d *direct) release(n int) {
	if n == 0 {
		return
	}
	d.mu.Lock()
	d.pending -= n
	if d.room != nil && d.pending < maxPending {
		close(d.room)
		d.room = nil
	}
	d.mu.Unlock()
}

func answerAll(calls []*Call, err error) {
	for _, c := range calls {
		c.Val, c.Err = 0, err
		c.Done <- c
	}
}

// run is the writer goroutine. Once Stop has begun, nothing more is queued: the writer
// writes what was queued before, on the current connection only, and exits.
func (d *direct) run() {
	defer close(d.writerDone)
	for {
		select {
		case <-d.stopping:
			for d.writeQueuedLocked(false) {
			}
			return
		case <-d.wake:
		}
		for !d.isStopping() && d.writeQueuedLocked(true) {
		}
	}
}

// writeQueuedLocked is writeQueued under writeMu.
func (d *direct) writeQueuedLocked(dial bool) bool {
	d.writeMu.Lock()
	defer d.writeMu.Unlock()
	return d.writeQueued(dial)
}

func (d *direct) isStopping() bool {
	select {
	case <-d.stopping:
		return true
	default:
		return false
	}
}

// writeQueued takes what is queued and writes it, dialling if dial is set and there is no
// connection. It reports false if the queue was empty. The caller holds writeMu.
func (d *direct) writeQueued(dial bool) bool {
	if dial {
		d.gather()
	}
	resend, calls := d.take()
	empty := len(resend)+len(calls) == 0
	if !empty {
		d.flush(resend, calls, dial)
		clear(resend)
		clear(calls)
	}
	d.spareResend, d.spare = resend[:0], calls[:0]
	return !empty
}

// gather lets the callers that replies are waking queue their next calls before the writer
// takes the queue, if replies are on their way: then the callers about to send share one
// write instead of trickling out one write each. runtime.Gosched puts the writer behind
// every goroutine that is ready to run, which is exactly the callers just answered; with
// nothing in flight the writer writes at once, for latency.
func (d *direct) gather() {
	if cn := d.cn; cn != nil && cn.busy.Load() > 0 {
		runtime.Gosched()
	}
}

// take takes the calls to resend and up to maxBatch queued calls (more to keep a SendAll
// together), swapping the queue's slices with the writer's spare ones.
func (d *direct) take() (resend, calls []*Call) {
	d.mu.Lock()
	defer d.mu.Unlock()
	resend, d.resend = d.resend, d.spareResend
	n := len(d.queued)
	if n > maxBatch {
		n = max(maxBatch, min(d.together, n))
	}
	d.together = max(d.together-n, 0)
	if n == len(d.queued) {
		calls, d.queued = d.queued, d.spare
	} else {
		calls = d.queued[:n:n]
		d.queued = append(d.spare, d.queued[n:]...)
	}
	d.spare, d.spareResend = nil, nil
	return resend, calls
}

// flush sends resend (with EVAL) and calls (with EVALSHA) in one write. Calls whose
// deadline has passed are answered without being sent; so are all of them if there is no
// connection to send them on (and dial is false, or dialling failed).
func (d *direct) flush(resend, calls []*Call, dial bool) {
	now := time.Now()
	done := 0 // calls answered here
	resend, done = dropExpired(resend, now, done)
	calls, done = dropExpired(calls, now, done)
	defer func() { d.release(done) }()
	if len(resend)+len(calls) == 0 {
		return
	}
	cn, dialled, err := d.connect(now, dial)
	if err != nil {
		answerAll(resend, err)
		answerAll(calls, err)
		done += len(resend) + len(calls)
		return
	}
	if dialled { // time has passed
		resend, done = dropExpired(resend, time.Now(), done)
		calls, done = dropExpired(calls, time.Now(), done)
	}
	if cn.forget.Swap(false) {
		for _, si := range d.scripts {
			si.loaded = 0
		}
	}
	f := flushPool.Get().(*flush)
	b := d.buf[:0]
	n := 0
	for _, c := range resend {
		if b, err = d.encode(b, f, cn, c, true); err != nil {
			c.Val, c.Err = 0, err
			c.Done <- c
			done++
			continue
		}
		n++
	}
	for _, c := range calls {
		if b, err = d.encode(b, f, cn, c, false); err != nil {
			c.Val, c.Err = 0, err
			c.Done <- c
			done++
			continue
		}
		n++
	}
	d.buf = b
	if cap(b) > maxKeepBuf {
		d.buf = nil
	}
	if len(f.entries) == 0 {
		putFlush(f)
		return
	}
	f.sent = time.Now()
	if !cn.push(f) {
		// Closed since connect: nothing was written.
		err := cn.error()
		for _, e := range f.entries {
			if c := e.call; c != nil {
				c.Val, c.Err = 0, err
				c.Done <- c
				done++
			}
		}
		putFlush(f)
		return
	}
	// From here on the reader owns f and its calls: it may answer them at any moment.
	d.flushes.Add(1)
	d.written.Add(int64(n))
	cn.lastUse = f.sent
	if d.wt > 0 && cn.writeUntil.Sub(f.sent) < d.wt/2 {
		// Moved forward by at least half the timeout at a time, not on every write.
		cn.writeUntil = f.sent.Add(d.wt)
		_ = cn.nc.SetWriteDeadline(cn.writeUntil)
	}
	if _, err := cn.nc.Write(b); err != nil {
		cn.close(cn.ioError(err, true))
	}
}

// dropExpired answers the calls whose deadline has passed and returns the others.
func dropExpired(calls []*Call, now time.Time, done int) ([]*Call, int) {
	live := calls[:0]
	for _, c := range calls {
		if !c.Deadline.IsZero() && !now.Before(c.Deadline) {
			c.Val, c.Err = 0, errExpired
			c.Done <- c
			done++
			continue
		}
		live = append(live, c)
	}
	return live, done
}

// encode appends c to b and its entry to f: EVAL with the script's source if eval, else
// EVALSHA, preceded by SCRIPT LOAD if the script has not been loaded on cn yet. On an error
// (an argument that cannot be encoded) c is not added and b is as it was, but for a SCRIPT
// LOAD, which is harmless.
func (d *direct) encode(b []byte, f *flush, cn *conn, c *Call, eval bool) ([]byte, error) {
	if c.Script == nil {
		return b, errors.New("dlock: a call without a script")
	}
	si := d.script(c.Script)
	if !eval && si.loaded != cn.gen && !cn.noLoad.Load() {
		b = appendArrayLen(b, 3)
		b = appendBulk(appendBulk(appendBulk(b, "SCRIPT"), "LOAD"), si.src)
		f.entries = append(f.entries, entry{})
		si.loaded = cn.gen
	}
	mark := len(b)
	b = appendArrayLen(b, 3+len(c.Keys)+len(c.Args))
	if eval {
		b = appendBulk(appendBulk(b, "EVAL"), si.src)
	} else {
		b = appendBulk(appendBulk(b, "EVALSHA"), si.sha)
	}
	b = appendBulkInt(b, int64(len(c.Keys)))
	for _, k := range c.Keys {
		b = appendBulk(b, k)
	}
	for i, a := range c.Args {
		var err error
		if b, err = appendArg(b, a); err != nil {
			return b[:mark], fmt.Errorf("argument %d: %w", i+1, err)
		}
	}
	f.entries = append(f.entries, entry{call: c, eval: eval})
	return b, nil
}

// script returns what the writer knows about s, learning it on first use.
func (d *direct) script(s *redis.Script) *scriptInfo {
	for _, si := range d.scripts {
		if si.script == s {
			return si
		}
	}
	var catch sourceCatcher
	s.Eval(context.Background(), &catch, nil)
	si := &scriptInfo{script: s, sha: s.Hash(), src: catch.src}
	if si.sha == "" { // redis.NewScriptServerSHA before its first load: the server's digest is SHA-1 too
		sum := sha1.Sum([]byte(si.src))
		si.sha = hex.EncodeToString(sum[:])
	}
	d.scripts = append(d.scripts, si)
	return si
}

// sourceCatcher is a redis.Scripter that sends nothing: it learns a script's source from
// Script.Eval, which go-redis offers no other way to read.
type sourceCatcher struct{ src string }

func (s *sourceCatcher) Eval(ctx context.Context, script string, _ []string, _ ...any) *redis.Cmd {
	s.src = script
	return redis.NewCmd(ctx)
}

func (s *sourceCatcher) EvalRO(ctx context.Context, script string, _ []string, _ ...any) *redis.Cmd {
	s.src = script
	return redis.NewCmd(ctx)
}

func (s *sourceCatcher) EvalSha(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return redis.NewCmd(ctx)
}

func (s *sourceCatcher) EvalShaRO(ctx context.Context, _ string, _ []string, _ ...any) *redis.Cmd {
	return redis.NewCmd(ctx)
}

func (s *sourceCatcher) ScriptExists(ctx context.Context, _ ...string) *redis.BoolSliceCmd {
	return redis.NewBoolSliceCmd(ctx)
}

func (s *sourceCatcher) ScriptLoad(ctx context.Context, script string) *redis.StringCmd {
	s.src = script
	return redis.NewStringCmd(ctx)
}

// connect returns the connection to write on: the current one, or a new one if dial is
// set (it is not once Stop has begun). A connection
// that the server demoted (READONLY) or that reached ConnMaxLifetime or ConnMaxIdleTime is
// replaced once it has answered what it was sent, so that calls for one key never race over
// two connections. After a failed dial it answers the last dial's error until the backoff
// has passed.
func (d *direct) connect(now time.Time, dial bool) (cn *conn, dialled bool, err error) {
	if cn = d.cn; cn != nil {
		idle := d.opt.ConnMaxIdleTime > 0 && now.Sub(cn.lastUse) > d.opt.ConnMaxIdleTime
		switch {
		case cn.dead.Load():
		case !dial: // Stop's last writes: on this connection as it is, or not at all
			return cn, false, nil
		case cn.retire.Load() || idle || (!cn.retireAt.IsZero() && now.After(cn.retireAt)):
			if !cn.waitIdle(d.stopping) {
				return nil, false, ErrStopped
			}
			cn.close(errRetired)
		default:
			return cn, false, nil
		}
		d.setConn(nil)
	}
	if !dial {
		return nil, false, ErrStopped
	}
	if now.Before(d.retryAt) {
		return nil, false, d.dialErr
	}
	d.gen++
	cn, err = d.dial(d.gen)
	if err != nil {
		if d.ctx.Err() != nil {
			return nil, true, ErrStopped
		}
		d.failures++
		d.retryAt = time.Now().Add(min(minBackoff<<min(d.failures-1, 10), maxBackoff))
		d.dialErr = err
		return nil, true, err
	}
	d.failures, d.dialErr = 0, nil
	d.setConn(cn)
	return cn, true, nil
}

func (d *direct) setConn(cn *conn) {
	d.cnMu.Lock()
	d.cn = cn
	d.cnMu.Unlock()
}

func (d *direct) current() *conn {
	d.cnMu.Lock()
	defer d.cnMu.Unlock()
	return d.cn
}

// stop: see Batcher.Stop.
func (d *direct) stop() {
	d.stopOnce.Do(func() {
		d.mu.Lock()
		d.stopped = true
		if d.room != nil {
			close(d.room) // the Sends waiting for room see stopped
			d.room = nil
		}
		d.mu.Unlock()
		close(d.stopping)
		d.cancel()

		// The replies in flight get the read timeout; then the connection is closed under
		// them, and under a writer stuck in a write.
		expired := make(chan struct{})
		timer := time.AfterFunc(d.stopWait, func() {
			close(expired)
			if cn := d.current(); cn != nil {
				cn.close(errStoppedInFlight)
			}
		})
		<-d.writerDone
		if cn := d.current(); cn != nil {
			cn.waitIdle(expired)
			cn.close(errStoppedInFlight)
		}
		timer.Stop()
		d.readers.Wait()

		d.mu.Lock()
		resend, queued := d.resend, d.queued
		d.resend, d.queued = nil, nil
		d.mu.Unlock()
		answerAll(resend, ErrStopped)
		answerAll(queued, ErrStopped)
	})
}
