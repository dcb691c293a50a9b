// Package batch shares round trips between concurrent callers: every script call that
// goroutines send to one Redis deployment while earlier calls are in flight goes out in the
// next write. It also lets a caller stop waiting at its deadline, and a round trip carries
// its calls' deadline as its context, so that go-redis's redials and retries stop when
// every caller of the round trip has stopped waiting.
//
// Every call goes through go-redis, so that the client's hooks (tracing,
// metrics) and MaxRetries apply to it. Single calls (Send, TrySend) go out as go-redis
// pipelines over a few lanes, each with one pipeline in flight: the calls queued while a
// lane's round trip is under way go out together in its next one; a caller that finds its
// lane idle may send its call itself (TryRun). SendAll (the renewals)
// always runs one explicit go-redis pipeline of its own, whatever carries single calls.
//
// A batcher made by NewAcked (acks.go) ends every round trip with WAIT, for the replica
// acknowledgements of WithReplicaAcks; it always uses the lanes.
//
// A round trip also carries the values of its callers' context (Call.Values) to go-redis's
// hooks, when its calls are of one caller: a tracing hook then makes its span a child of
// the caller's (roundtrip.go).
//
// go-redis' AutoPipeliner (auto.go) is the other carrier of single calls, measured against
// the lanes in BENCHMARKS.md; only the benchmark program selects it, with DefaultTransport.
//
// In every case, calls for one key are run in the order they were queued: an Unlock never
// overtakes the Lock that a slow server has not run yet. The exceptions are calls whose
// fate is unknown: a call that failed with its connection (or its read timeout) may still
// run on the server after calls sent later on a new connection; and SendAll runs a
// pipeline of its own. A call that the server answers NOSCRIPT (its script cache flushed
// under a live connection) is sent again only if no call of its hash slot written behind
// it ran: else it fails, unsent (notResent).
//
// Mutexes: roundTrip.mu guards a lane context's done, closed, active and values, and is
// released before the values' own Value is called.
//
// Errors: an error reply from Redis is an error that implements redis.Error (match it with
// redis.HasErrorPrefix or go-redis' Is*Error helpers), a nil reply is redis.Nil, and a call
// that could not be run says why: the dial or handshake error (a wrong password starts
// with the server's WRONGPASS), the I/O error that closed the connection, the read timeout.
package batch

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// ErrStopped is the error of a call sent after Stop, or one Stop could not send (see
// Stop): it was never sent. It is the Client's ErrClosed (the engine exports this value),
// since a Client stops its batchers when it is closed.
var ErrStopped = errors.New("dlock: client closed")

// errExpired is the error of a call whose deadline passed before it was sent: it was never
// sent, so it cannot have changed anything in Redis.
var errExpired = errors.New("deadline passed before the call was sent")

// maxBatch bounds one pipeline or write, so that a burst does not become one huge round
// trip (a SendAll is kept together all the same).
const maxBatch = 256

// Call is one script invocation. The caller fills in Script, Keys, Args, Node, Deadline,
// Done and, if it has one, Values; the batcher fills in Val and Err and then sends the Call on Done exactly once. The
// caller must not touch the Call between handing it over and receiving it from Done.
//
// Err is nil with the script's integer reply in Val; redis.Nil for a nil reply; an error
// implementing redis.Error for an error reply (match it with redis.HasErrorPrefix);
// errExpired (see IsExpired) for a call never sent; ErrStopped; or an error that says
// why the connection failed: a call that was written before that may or may not have run.
type Call struct {
	Script *redis.Script
	Keys   []string
	Args   []any // strings, []byte, integers, floats, bools, as go-redis accepts them
	// KeyArgs, if not nil, is Keys boxed ([]any of the same strings, read-only), kept by a
	// caller that sends the same keys many times: it saves an allocation per key and call.
	KeyArgs []any
	Node    int // for the caller: which node the call went to
	// Before, if not nil, is a call to send just ahead of this one, in the same round trip
	// (on a Cluster, the same pipeline, whose parts go to their masters at once), that no
	// one waits for: it is answered on its own Done.
	Before   *Call
	Deadline time.Time // zero for none; a call still queued at its deadline is not sent
	// Values, if not nil, is the context of the caller the call is made for, of which only
	// the values are used (Deadline, not its deadline or cancellation, bounds the call).
	// A round trip of the lanes whose calls all have the same Values carries them to
	// go-redis's hooks, so that a tracing hook makes the call's span a child of the
	// caller's; a round trip of calls with different Values carries none (roundtrip.go).
	// The AutoPipeliner carries none.
	Values context.Context

	Val int64 // the script's integer reply
	Err error
	// Acked and AckErr, for a batcher made by NewAcked and a call that did not fail: how
	// many replicas acknowledged the round trip that carried the call (WAIT's reply), or
	// why WAIT failed. Zero and nil otherwise.
	Acked  int64
	AckErr error

	// Done must have room for the reply: the batcher never blocks on it. It is not
	// send-only so that a caller that stopped waiting can still hear the reply later.
	Done chan *Call

	cmd *redis.Cmd // the auto-pipelined command while the call is in flight
}

// Batcher sends the calls of one deployment. Its methods are safe for concurrent use.
type Batcher struct {
	a *auto  // go-redis' AutoPipeliner, for single calls; or nil
	l *lanes // go-redis pipelines: single calls unless a is set, and SendAll
}

// Transport names a way of carrying single calls (SendAll always runs one go-redis
// pipeline of its own).
type Transport int

const (
	Lanes        Transport = iota // go-redis pipelines over a few lanes
	AutoPipeline                  // go-redis' AutoPipeliner
)

// DefaultTransport is the transport New uses. Only the benchmark program changes it, to
// measure the transports side by side.
var DefaultTransport = Lanes

// New starts a batcher for rdb on DefaultTransport: with lanes (the default, and the
// fallback) it keeps inFlight pipelines in flight at once; with the AutoPipeliner it
// answers calls from inFlight collectors. New(nil, 0) is a batcher that only answers
// ErrStopped.
func New(rdb redis.UniversalClient, inFlight int) *Batcher {
	if DefaultTransport == AutoPipeline && !IsNilClient(rdb) && inFlight > 0 {
		if a := newAuto(rdb, inFlight); a != nil {
			return &Batcher{a: a, l: a.lanes}
		}
	}
	return &Batcher{l: newLanes(rdb, inFlight)}
}

// Send queues c. It blocks only while too many calls wait for the node (a hung node under
// load), and not past c.Deadline: a call that could not be queued by then is answered with
// the expiry error, as if it had expired in the queue. It returns false (having sent
// nothing) if the batcher is stopped.
func (b *Batcher) Send(c *Call) bool {
	if b.a != nil {
		return b.a.send(c, true)
	}
	return b.l.send(c, true)
}

// TrySend is Send without the wait: it returns false, having done nothing, if too many
// calls wait for the node or the batcher is stopped.
func (b *Batcher) TrySend(c *Call) bool {
	if b.a != nil {
		return b.a.send(c, false)
	}
	return b.l.send(c, false)
}

// TryRun is TrySend for a caller that will wait for c's reply next: if c's lane is idle
// (no round trip under way, no call queued) it sends c itself, from the calling goroutine,
// and returns once c is answered on Done, which saves handing c to the lane's goroutine
// and the reply back. It does so only for a call with a Deadline, to a client that ends
// its socket reads and writes at the context's deadline (ContextTimeoutEnabled), so that
// TryRun is back by c.Deadline however the server behaves; otherwise, and on the
// AutoPipeliner, it is TrySend. A fan-out must not TryRun one node's call before it has
// sent the others: their round trips would wait for this one.
func (b *Batcher) TryRun(c *Call) bool {
	if b.a != nil {
		return b.a.send(c, false)
	}
	return b.l.run(c)
}

// SendAll queues calls so that they go out together: in one go-redis pipeline, not split
// with other calls in between. It never blocks and ignores the bound on waiting calls, so
// it is for a set bounded by the caller, such as the leases due for renewal. Every call is
// answered on its Done, with ErrStopped if the batcher is stopped; calls whose Deadline
// passes before they are written are answered with the expiry error.
func (b *Batcher) SendAll(calls []*Call) {
	if len(calls) == 0 {
		return
	}
	if b.l == nil { // an AutoPipeliner batcher built by a test
		b.a.sendAll(calls)
		return
	}
	b.l.sendAll(calls)
}

// Stop refuses new calls and shuts the batcher down: it finishes the pipelines in flight
// (go-redis' read timeout bounds them), sends the calls queued before it for up to a
// second more (drainTime), answers those it could not send by then with ErrStopped, and
// returns once every goroutine of the batcher has exited. A server that let a round trip
// outlast its calls' deadline is sent nothing more: the calls queued for it are answered
// with ErrStopped at once. Stop may be called more than once, also concurrently.
func (b *Batcher) Stop() {
	if b.a != nil {
		b.a.stop()
	}
	if b.l != nil {
		b.l.stop()
	}
}

// IsExpired reports whether err means the call was dropped before it was sent.
func IsExpired(err error) bool { return errors.Is(err, errExpired) }

// seen is the set of scripts a batcher has sent, with each one's SHA1 boxed once for the
// commands. The first call of each script goes out as EVAL, which runs the script and
// loads it into the server's cache, and the later ones as EVALSHA: an EVALSHA first would
// be answered NOSCRIPT on a fresh server and sent again, which costs a round trip and
// makes the server count two script runs for one call (as the hand-off tests count them).
// On a Cluster each master has a cache of its own, so a script counts as sent per master,
// the one that owns the call's first key: counted once for all, an EVALSHA of it to
// another master was answered NOSCRIPT, and when a call of the same slot behind it ran,
// the call failed unsent (notResent), an Unlock on a fresh Cluster among them. A NOSCRIPT
// later (restart, SCRIPT FLUSH, a slot that moved between the lookup and the send) is
// still answered with EVAL. A nil *seen sends EVALSHA only.
type seen struct {
	m       sync.Map             // seenKey -> any(the script's SHA1)
	cluster *redis.ClusterClient // nil but on a Cluster
}

// seenKey is a script sent to a master: node is that master's client on a Cluster (go-redis
// keeps one per node address), nil elsewhere.
type seenKey struct {
	script *redis.Script
	node   *redis.Client
}

// cmd builds c's command: EVAL if its script was never sent before (which marks it sent),
// else EVALSHA. The EVALSHA is built here rather than by go-redis' EvalSha, which boxes
// the hash and every key anew for each call: with c.KeyArgs and the hash boxed once, it
// costs two allocations (the arguments and the command).
func (sn *seen) cmd(ctx context.Context, c *Call, via scripter) *redis.Cmd {
	sha, ok := sn.sha(ctx, c)
	if !ok {
		return c.Script.Eval(ctx, via, c.Keys, c.Args...)
	}
	args := make([]any, 0, 3+len(c.Keys)+len(c.Args))
	args = append(args, "evalsha", sha, len(c.Keys))
	if sameKeys(c.KeyArgs, c.Keys) {
		args = append(args, c.KeyArgs...)
	} else {
		for _, k := range c.Keys {
			args = append(args, k)
		}
	}
	cmd := redis.NewCmd(ctx, append(args, c.Args...)...)
	if len(c.Keys) > 0 {
		cmd.SetFirstKeyPos(3)
	}
	_ = via.Process(ctx, cmd)
	return cmd
}

// sameKeys reports whether boxed holds keys: a KeyArgs left over from other keys must not
// be sent.
func sameKeys(boxed []any, keys []string) bool {
	if len(boxed) != len(keys) {
		return false
	}
	for i, k := range keys {
		if b, ok := boxed[i].(string); !ok || b != k {
			return false
		}
	}
	return true
}

// scripter is what dlock sends scripts through: a client, a pipeline, the AutoPipeliner.
type scripter interface {
	redis.Scripter
	Process(ctx context.Context, cmd redis.Cmder) error
}

// sha returns c's script's boxed SHA1 and true if it was sent before (to the master of
// c's first key, on a Cluster); else it marks it sent and returns false. A nil *seen
// counts every script as sent.
func (sn *seen) sha(ctx context.Context, c *Call) (any, bool) {
	if sn == nil {
		return c.Script.Hash(), true
	}
	k := seenKey{script: c.Script, node: sn.master(ctx, c)}
	if sha, ok := sn.m.Load(k); ok {
		return sha, true
	}
	sha, loaded := sn.m.LoadOrStore(k, any(c.Script.Hash()))
	return sha, loaded
}

// master is the client of the Cluster master that owns c's first key, as the client's
// slot map has it now; nil elsewhere, or when the map cannot say (the call is then counted
// with the others of no master, and a NOSCRIPT is answered as after a flush). A pointer,
// not the address: the key of every call's lookup is then hashed without its string. The
// lookup costs a call about 55 ns and no allocation (BenchmarkSeenSHAOnCluster: 76 ns
// against 21 ns on one server, medians of 5).
func (sn *seen) master(ctx context.Context, c *Call) *redis.Client {
	if sn.cluster == nil || len(c.Keys) == 0 {
		return nil
	}
	m, err := sn.cluster.MasterForKey(ctx, c.Keys[0])
	if err != nil {
		return nil
	}
	return m
}

// IsNilClient reports a nil client, also a nil pointer in a non-nil interface.
func IsNilClient(rdb redis.UniversalClient) bool {
	switch r := rdb.(type) {
	case nil:
		return true
	case *redis.Client:
		return r == nil
	case *redis.ClusterClient:
		return r == nil
	case *redis.Ring:
		return r == nil
	}
	return false
}

// withBefore returns batch with the Before of each call (Call.Before) just ahead of it:
// batch itself when no call has one, the common case.
func withBefore(batch []*Call) []*Call {
	n := 0
	for _, c := range batch {
		if c.Before != nil {
			n++
		}
	}
	if n == 0 {
		return batch
	}
	out := make([]*Call, 0, len(batch)+n)
	for _, c := range batch {
		if c.Before != nil {
			out = append(out, c.Before)
		}
		out = append(out, c)
	}
	return out
}
