// Package batch shares round trips between concurrent callers: every script call that
// goroutines send to one Redis deployment while earlier calls are in flight goes out in the
// next write. It also lets a caller stop waiting when its context ends, which go-redis
// itself does not do for a server that accepted the connection and then stopped answering.
//
// There are two transports behind one Batcher:
//
//   - For a *redis.Client (a standalone server, or a Sentinel failover client), the direct
//     transport: one connection of its own, dialled with the client's Options.Dialer and set
//     up as go-redis would (AUTH, SELECT, CLIENT SETNAME), auto-pipelined as rueidis does.
//     A writer goroutine writes everything queued in one syscall without waiting for the
//     replies of earlier writes; a reader goroutine answers the calls in order. It bypasses
//     go-redis entirely, and with it go-redis' hooks and command retries: instrument the
//     Options.Dialer to observe it. Options it cannot honour (OnConnect, Limiter,
//     StreamingCredentialsProvider) select the other transport.
//   - For every other client (Cluster, Ring, ...), go-redis pipelines over a few lanes,
//     each with one pipeline in flight.
//
// Either way, calls for one key are run in the order they were queued: an Unlock never
// overtakes the Lock that a slow server has not run yet. The exceptions are calls whose
// fate is unknown: a call that failed with its connection (or its read timeout) may still
// run on the server after calls sent later on a new connection; a call that the server
// answers NOSCRIPT (its script cache flushed under a live connection) is sent again after
// the calls written behind it; and on the go-redis path, SendAll runs a pipeline of its own.
//
// Errors: an error reply from Redis is an error that implements redis.Error (match it with
// redis.HasErrorPrefix or go-redis' Is*Error helpers), a nil reply is redis.Nil, and a call
// that could not be run says why: the dial or handshake error (a wrong password starts
// with the server's WRONGPASS), the I/O error that closed the connection, the read timeout.
package batch

import (
	"errors"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrStopped is the error of a call sent after Stop, or still queued when Stop came: it was
// never sent.
var ErrStopped = errors.New("dlock: client closed")

// errExpired is the error of a call whose deadline passed before it was sent: it was never
// sent, so it cannot have changed anything in Redis.
var errExpired = errors.New("deadline passed before the call was sent")

// maxBatch bounds one pipeline or write, so that a burst does not become one huge round
// trip (a SendAll is kept together all the same).
const maxBatch = 256

// Call is one script invocation. The caller fills in Script, Keys, Args, Node, Deadline and
// Done; the batcher fills in Val and Err and then sends the Call on Done exactly once. The
// caller must not touch the Call between handing it over and receiving it from Done.
//
// Err is nil with the script's integer reply in Val; redis.Nil for a nil reply; an error
// implementing redis.Error for an error reply (match it with redis.HasErrorPrefix);
// errExpired (see IsExpired) for a call never sent; ErrStopped; or an error that says
// why the connection failed: a call that was written before that may or may not have run.
type Call struct {
	Script   *redis.Script
	Keys     []string
	Args     []any     // strings, []byte, integers, floats, bools, as go-redis accepts them
	Node     int       // for the caller: which node the call went to
	Deadline time.Time // zero for none; a call still queued at its deadline is not sent

	Val int64 // the script's integer reply
	Err error

	// Done must have room for the reply: the batcher never blocks on it. It is not
	// send-only so that a caller that stopped waiting can still hear the reply later.
	Done chan *Call
}

// Batcher sends the calls of one deployment. Its methods are safe for concurrent use.
type Batcher struct {
	d *direct // the direct transport, for a *redis.Client; or nil
	l *lanes  // go-redis pipelines, for the other clients; or nil
}

// New starts a batcher for rdb. For a *redis.Client whose options the direct transport can
// honour it opens its own connection when the first call comes; for other clients it keeps
// inFlight pipelines in flight at once (lanes). New(nil, 0) is a batcher that only answers
// ErrStopped.
func New(rdb redis.UniversalClient, inFlight int) *Batcher {
	if c, ok := rdb.(*redis.Client); ok && c != nil && inFlight > 0 {
		if opt := c.Options(); directOptions(opt) == "" {
			return &Batcher{d: newDirect(opt)}
		}
	}
	return &Batcher{l: newLanes(rdb, inFlight)}
}

// Send queues c. It blocks only while too many calls wait for the node (a hung node under
// load), and not past c.Deadline: a call that could not be queued by then is answered with
// the expiry error, as if it had expired in the queue. It returns false (having sent
// nothing) if the batcher is stopped.
func (b *Batcher) Send(c *Call) bool {
	if b.d != nil {
		return b.d.send(c, true)
	}
	return b.l.send(c, true)
}

// TrySend is Send without the wait: it returns false, having done nothing, if too many
// calls wait for the node or the batcher is stopped.
func (b *Batcher) TrySend(c *Call) bool {
	if b.d != nil {
		return b.d.send(c, false)
	}
	return b.l.send(c, false)
}

// SendAll queues calls so that they go out together: in one write (or one go-redis
// pipeline), not split with other calls in between. It never blocks and ignores the bound
// on waiting calls, so it is for a set bounded by the caller, such as the leases due for
// renewal. Every call is answered on its Done, with ErrStopped if the batcher is stopped;
// calls whose Deadline passes before they are written are answered with the expiry error.
func (b *Batcher) SendAll(calls []*Call) {
	if len(calls) == 0 {
		return
	}
	if b.d != nil {
		b.d.sendAll(calls)
		return
	}
	b.l.sendAll(calls)
}

// Stop refuses new calls and shuts the batcher down. The direct transport first writes the
// calls queued before Stop on its current connection (it dials no new one), so that a
// release queued just before a Client's Close goes out; the go-redis lanes finish the
// pipelines in flight and send nothing more. Then Stop waits for the replies in flight, for
// at most the client's ReadTimeout (3s without one), after which the calls still waiting
// are answered with an error that says they may have run; answers the calls it did not
// send with ErrStopped; closes the connection; and returns once every goroutine of the
// batcher has exited. Stop may be called more than once, also concurrently.
func (b *Batcher) Stop() {
	if b.d != nil {
		b.d.stop()
		return
	}
	b.l.stop()
}

// IsExpired reports whether err means the call was dropped before it was sent.
func IsExpired(err error) bool { return errors.Is(err, errExpired) }
