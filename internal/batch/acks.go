package batch

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
)

// Acks is what a Batcher made by NewAcked asks of every write: that Replicas replicas
// of the master that ran it acknowledge it within Timeout (WAIT Replicas Timeout).
//
// WAIT cannot run inside a script, and it waits for the master's replication offset as
// of its connection's last command (which covers the master's other writes up to then
// too, any client's): it must follow the scripts on their connection. So every
// round trip of an acked Batcher is one explicit pipeline per master, its calls and then
// one WAIT, whose reply every call of the pipeline gets (Call.Acked). One WAIT covers them
// all, since replication is one ordered stream: a master that has the offset of the last
// write acknowledged has every earlier one acknowledged. The cost is paid once per round
// trip, not once per call: the renewals of one tick, one pipeline, wait once.
//
// A WAIT at the end of a shared pipeline makes every call of it wait for the
// acknowledgement, which each of them needs anyway (every call dlock sends is a write,
// or a refusal that is not worth an acknowledgement but costs nothing more to wait for).
// The calls made while a WAIT is out queue for the lane's next round trip, as they do
// behind any round trip, and are acknowledged by its WAIT; the connection is a pooled one
// of dlock's own pipelines, which no other command of the program waits behind.
type Acks struct {
	Replicas int
	Timeout  time.Duration
	// AOF: end with WAITAOF Local Replicas Timeout instead (Redis 7.2 and later): Local
	// (0 or 1) is whether the master's own append-only file must have fsynced the writes,
	// Replicas how many replicas' must have.
	AOF   bool
	Local int
}

// On reports whether a are asked for at all.
func (a Acks) On() bool { return a.Replicas > 0 || a.Local > 0 }

// NewAcked starts a batcher for rdb whose every round trip ends with WAIT (see Acks), on
// inFlight lanes of go-redis pipelines (the AutoPipeliner cannot carry a WAIT: it would
// block the client's shared pipeline). rdb is a *redis.Client (a server, or a Sentinel
// failover client) or a *redis.ClusterClient; on a Cluster the calls go in one pipeline
// per master, on the node client of the master that the cluster client's slot map names.
func NewAcked(rdb redis.UniversalClient, inFlight int, acks Acks) *Batcher {
	l := newLanes(rdb, inFlight)
	l.acks = &acks
	return &Batcher{l: l}
}

// waitCmd is the WAIT (or WAITAOF) that ends an acked pipeline. go-redis reads a
// pipeline's replies with the client's ReadTimeout, which must be longer than the WAIT's
// (the root package refuses a timeout that is not).
func (a *Acks) waitCmd(ctx context.Context) redis.Cmder {
	if a.AOF {
		return redis.NewIntSliceCmd(ctx, "waitaof", a.Local, a.Replicas, a.Timeout.Milliseconds())
	}
	return redis.NewIntCmd(ctx, "wait", a.Replicas, a.Timeout.Milliseconds())
}

// ErrNoLocalFsync is the acknowledgement error of a WAITAOF whose master did not fsync
// its own append-only file in time.
var ErrNoLocalFsync = errors.New("the master did not fsync its append-only file in time")

// acked reads the reply of waitCmd: how many replicas acknowledged, or why the
// acknowledgement failed.
func (a *Acks) acked(cmd redis.Cmder) (int64, error) {
	switch c := cmd.(type) {
	case *redis.IntSliceCmd:
		v, err := c.Result()
		switch {
		case err != nil:
			return 0, err
		case len(v) != 2:
			return 0, fmt.Errorf("WAITAOF replied %v, not [local, replicas]", v)
		case v[0] < int64(a.Local):
			return v[1], ErrNoLocalFsync
		}
		return v[1], nil
	case *redis.IntCmd:
		return c.Result()
	}
	return 0, fmt.Errorf("unexpected acknowledgement command %T", cmd)
}

// runAcked runs calls, each followed by its master's acknowledgement: one pipeline ending
// with WAIT per master, the masters at once.
func (b *lanes) runAcked(ctx context.Context, calls []*Call) {
	cc, ok := b.rdb.(*redis.ClusterClient)
	if !ok {
		b.ackedPipeline(ctx, b.rdb, calls, false) // a MOVED here is answered as the call's error
		return
	}
	groups := byMaster(ctx, cc, calls)
	if len(groups) == 1 {
		for node, calls := range groups {
			b.clusterPipeline(ctx, cc, node, calls)
		}
		return
	}
	var wg sync.WaitGroup
	for node, calls := range groups {
		wg.Go(func() { b.clusterPipeline(ctx, cc, node, calls) })
	}
	wg.Wait()
}

// byMaster groups calls by the master of their first key, as the cluster client's slot
// map has it; a call whose master cannot be found is answered with why.
func byMaster(ctx context.Context, cc *redis.ClusterClient, calls []*Call) map[*redis.Client][]*Call {
	groups := make(map[*redis.Client][]*Call, 1)
	for _, c := range calls {
		if len(c.Keys) == 0 {
			answerAll([]*Call{c}, errors.New("dlock: a call without a key cannot be routed on a Cluster"))
			continue
		}
		node, err := cc.MasterForKey(ctx, c.Keys[0])
		if err != nil {
			cc.ReloadState(ctx)
			answerAll([]*Call{c}, err)
			continue
		}
		groups[node] = append(groups[node], c)
	}
	return groups
}

// clusterPipeline runs one master's calls. The calls its node answers MOVED (the slot
// moved: a failover, a resharding) are sent once more, to the master the slot map names
// once it has reloaded, as go-redis' own cluster pipelines follow MOVED.
func (b *lanes) clusterPipeline(ctx context.Context, cc *redis.ClusterClient, node *redis.Client, calls []*Call) {
	moved := b.ackedPipeline(ctx, node, calls, true)
	if len(moved) == 0 {
		return
	}
	cc.ReloadState(ctx)
	for to, calls := range redirect(ctx, cc, moved) {
		b.ackedPipeline(ctx, to, calls, false)
	}
}

// redirectWait bounds the wait for the slot map to name the master a MOVED pointed to.
const redirectWait = 500 * time.Millisecond

// redirect groups moved calls by the master their MOVED named, once the slot map names it
// too (the client of that address is the cluster client's, with its hooks and pool),
// within redirectWait and ctx; the calls for which it does not are answered with their
// MOVED error.
func redirect(ctx context.Context, cc *redis.ClusterClient, moved []*Call) map[*redis.Client][]*Call {
	groups := make(map[*redis.Client][]*Call, 1)
	deadline := time.Now().Add(redirectWait)
	for _, c := range moved {
		addr, _ := redis.IsMovedError(c.Err)
		for {
			node, err := cc.MasterForKey(ctx, c.Keys[0])
			if err == nil && node.Options().Addr == addr {
				groups[node] = append(groups[node], c)
				break
			}
			if !time.Now().Before(deadline) || ctx.Err() != nil {
				c.Done <- c // with its MOVED error
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	return groups
}

// ackedPipeline runs calls in one pipeline on rdb that ends with WAIT, and answers them
// with their replies and the WAIT's. Calls that find the server's script cache empty are
// run again as EVAL, with their script's source, in one more acknowledged pipeline. With
// follow, calls answered MOVED are returned unanswered.
func (b *lanes) ackedPipeline(ctx context.Context, rdb redis.UniversalClient, calls []*Call, follow bool) (moved []*Call) {
	missing, moved := b.ackedRound(ctx, rdb, calls, &b.seen, follow)
	if len(missing) > 0 {
		_, again := b.ackedRound(ctx, rdb, missing, nil, follow)
		moved = append(moved, again...)
	}
	return moved
}

// ackedRound is one pipeline of ackedPipeline. With sn nil, every call goes as EVAL (which
// loads its script); else as sn.cmd sends it, and the calls answered NOSCRIPT are
// returned unanswered (missing).
func (b *lanes) ackedRound(ctx context.Context, rdb redis.UniversalClient, calls []*Call, sn *seen, follow bool) (missing, moved []*Call) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		if sn != nil {
			cmds[i] = sn.cmd(ctx, c, pipe)
		} else {
			cmds[i] = c.Script.Eval(ctx, pipe, c.Keys, c.Args...)
		}
	}
	wait := b.acks.waitCmd(ctx)
	_ = pipe.Process(ctx, wait)
	_, _ = pipe.Exec(ctx)
	acked, ackErr := b.acks.acked(wait)
	for i, c := range calls {
		c.Val, c.Err = cmds[i].Int64()
		c.Acked, c.AckErr = 0, nil
		if c.Err == nil {
			c.Acked, c.AckErr = acked, ackErr
		}
	}
	reloadOnFailure(b.rdb, calls) // before the calls are handed back
	notResent(calls)
	for _, c := range calls {
		switch {
		case sn != nil && isNoScript(c.Err) && !errors.Is(c.Err, errNotResent):
			missing = append(missing, c)
		case follow && c.Err != nil && isMoved(c.Err):
			moved = append(moved, c)
		default:
			c.Done <- c
		}
	}
	return missing, moved
}

func isMoved(err error) bool {
	_, ok := redis.IsMovedError(err)
	return ok
}

// reloadOnFailure asks a cluster client to reload its slot map when a call failed with
// its connection. go-redis reloads it on MOVED, but after a master died only every
// ClusterStateReloadInterval (a minute by default): until then it sends the dead master's
// slots to it, and a lock there could not be had, renewed or released for that long
// after its replica took over. go-redis runs one reload at a time, but does not space them
// out after one that failed (as it does while the dead master is still in the map), so
// dlock asks at most once per reloadInterval (reloadIf).
func reloadOnFailure(rdb redis.UniversalClient, calls []*Call) {
	if _, ok := rdb.(*redis.ClusterClient); !ok {
		return
	}
	for _, c := range calls {
		if reloadIf(rdb, c.Err) {
			return
		}
	}
}

// reloadInterval is the least time between two reloads reloadIf asks for.
const reloadInterval = 500 * time.Millisecond

// lastReload is when reloadIf last asked for a reload (monotonic nanoseconds since
// clockStart). It is shared by every cluster client of the process: a storm of failures
// on one Cluster can delay another's reload by up to reloadInterval, after which its own
// next failure asks for it.
var lastReload atomic.Int64

var clockStart = time.Now()

// reloadIf asks a cluster client to reload its slot map if err is a failure of the
// connection (see reloadOnFailure) and no reload was asked for within reloadInterval, and
// reports whether it did. A context that ended is the caller's, not the connection's.
func reloadIf(rdb redis.UniversalClient, err error) bool {
	cc, ok := rdb.(*redis.ClusterClient)
	if !ok || err == nil || isReply(err) || errors.Is(err, ErrStopped) || IsExpired(err) ||
		errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return false
	}
	now := int64(time.Since(clockStart))
	last := lastReload.Load()
	if last != 0 && now-last < int64(reloadInterval) || !lastReload.CompareAndSwap(last, now) {
		return false
	}
	cc.ReloadState(context.Background())
	return true
}

// isReply reports whether err is the server's answer (an error reply or redis.Nil), not a
// failure to get one.
func isReply(err error) bool {
	var rerr redis.Error
	return errors.As(err, &rerr)
}
