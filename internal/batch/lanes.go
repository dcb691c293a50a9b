package batch

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// lanes is the default transport: go-redis pipelines, so that the client's hooks and
// MaxRetries see every call. It measured as fast as the AutoPipeliner, within the noise,
// with half its allocations: a lone caller pays for no batch machinery (BENCHMARKS.md).
//
// Calls are spread over lanes by their first key, each lane with one pipeline in flight:
// calls for one key are sent in the order they were queued (an Unlock cannot overtake the
// Lock that a slow node has not run yet), calls for different keys go out in parallel.
// A lane's worker sends the calls queued on it; a caller that finds its lane idle may send
// its own call instead (run), which saves the hand-off to the worker and back.
type lanes struct {
	rdb   redis.UniversalClient
	lanes []*lane
	seen  seen
	acks  *Acks // every round trip ends with WAIT (NewAcked); nil: none
	// bounded: rdb ends a read or write on the socket at the context's deadline
	// (ContextTimeoutEnabled), so that a caller sending its own call is back by the
	// call's deadline even if the server hangs.
	bounded bool

	stopOnce sync.Once
	stopped  chan struct{}  // closed by stop first: sends are refused
	sealed   chan struct{}  // closed by stop once no send can queue a call: workers drain
	wg       sync.WaitGroup // the lane workers, the pipelines of SendAll, the callers' own

	// sending is read-locked by Send while it may still queue a call, and locked by Stop
	// before it seals the queues, so that no call is queued after the drain.
	sending sync.RWMutex
}

// lane is one queue of calls and the right to run its round trips, one at a time.
type lane struct {
	calls chan *Call
	// queued counts the calls sent to calls and not yet taken out for a round trip: a
	// caller may send its own call only when none is, or it would overtake them.
	queued atomic.Int32

	run     sync.Mutex // held for a round trip of the lane, by its worker or a caller
	rt      *roundTrip // guarded by run
	overran bool       // guarded by run: the last round trip outlasted its deadline
	one     [1]*Call   // guarded by run: the batch of a caller's own round trip
}

// newLanes starts the given number of lanes, each with one pipeline in flight at once.
func newLanes(rdb redis.UniversalClient, inFlight int) *lanes {
	b := &lanes{
		rdb:     rdb,
		lanes:   make([]*lane, max(inFlight, 1)),
		seen:    seen{cluster: asCluster(rdb)},
		bounded: boundsIO(rdb),
		stopped: make(chan struct{}),
		sealed:  make(chan struct{}),
	}
	for i := range b.lanes {
		l := &lane{calls: make(chan *Call, 4*maxBatch), rt: newRoundTrip()}
		b.lanes[i] = l
		if i < inFlight { // none for New(nil, 0), a batcher that only answers ErrStopped
			b.wg.Add(1)
			go b.work(l)
		}
	}
	return b
}

// boundsIO reports whether rdb applies a command's context deadline to its socket reads
// and writes (ContextTimeoutEnabled); otherwise only ReadTimeout and WriteTimeout end them.
func boundsIO(rdb redis.UniversalClient) bool {
	switch r := rdb.(type) {
	case *redis.Client:
		return r != nil && r.Options().ContextTimeoutEnabled
	case *redis.ClusterClient:
		return r != nil && r.Options().ContextTimeoutEnabled
	}
	return false
}

// lane returns the lane of c's first key, chosen by the key's Redis Cluster hash tag
// (FNV-1a of it), so that every key of one lock, which shares the tag, shares the lane.
func (b *lanes) lane(c *Call) *lane {
	if len(c.Keys) == 0 || len(b.lanes) == 1 {
		return b.lanes[0]
	}
	return b.lanes[tagHash(c.Keys[0])%uint32(len(b.lanes))]
}

// tagHash is FNV-1a of key's hash tag.
func tagHash(key string) uint32 {
	tag := keyspace.HashTag(key)
	h := uint32(2166136261)
	for i := 0; i < len(tag); i++ {
		h = (h ^ uint32(tag[i])) * 16777619
	}
	return h
}

func (b *lanes) send(c *Call, wait bool) bool {
	b.sending.RLock()
	defer b.sending.RUnlock()
	select {
	case <-b.stopped:
		return false
	default:
	}
	l := b.lane(c)
	l.queued.Add(1) // before c is in the queue: from here no caller's own call overtakes it
	select {
	case l.calls <- c:
		return true
	default:
	}
	if wait {
		if queued, ok := b.wait(l, c); queued || ok {
			return ok
		}
	}
	l.queued.Add(-1)
	return false
}

// wait queues c on l once there is room and reports whether it did; else, at c's
// deadline, it answers c with the expiry error (ok), or the lanes stopped first (!ok).
func (b *lanes) wait(l *lane, c *Call) (queued, ok bool) {
	var expired <-chan time.Time
	if !c.Deadline.IsZero() {
		timer := time.NewTimer(time.Until(c.Deadline))
		defer timer.Stop()
		expired = timer.C
	}
	select {
	case l.calls <- c:
		return true, true
	case <-b.stopped:
		return false, false
	case <-expired:
		l.queued.Add(-1)
		c.Err = errExpired
		c.Done <- c
		return false, true
	}
}

// run sends c from the calling goroutine if its lane is idle (no round trip under way,
// no call queued) and returns once c is answered on Done; else it queues c as send
// without waiting does. Only a call with a deadline, to a client that ends its socket I/O
// at the context's deadline, is sent so: a caller must not be held past its deadline by
// a server that does not answer. Acknowledged round trips stay with the workers.
func (b *lanes) run(c *Call) bool {
	l := b.lane(c)
	if !b.bounded || b.acks != nil || c.Deadline.IsZero() || !b.claim(l) {
		return b.send(c, false)
	}
	l.one[0] = c
	l.overran = b.exec(l, l.one[:], time.Time{})
	l.one[0] = nil
	l.run.Unlock()
	b.wg.Done()
	return true
}

// claim takes l's round trip for a caller's own call, if l is idle and the lanes are not
// stopped: then it returns true with l.run held and the round trip counted in wg (Stop
// waits for it as for a worker's). queued is checked again under l.run: a call queued
// meanwhile must not be overtaken.
func (b *lanes) claim(l *lane) bool {
	if l.queued.Load() != 0 {
		return false
	}
	b.sending.RLock()
	defer b.sending.RUnlock()
	select {
	case <-b.stopped:
		return false // send refuses c as well
	default:
	}
	if !l.run.TryLock() {
		return false
	}
	if l.queued.Load() != 0 {
		l.run.Unlock()
		return false
	}
	b.wg.Add(1)
	return true
}

// stop refuses new calls and ends the workers once they have sent the calls queued
// before it, within drainTime (drain). It waits for the workers and the pipelines of
// SendAll; the calls of a lane without a worker (New(nil, 0)) are answered with
// ErrStopped.
func (b *lanes) stop() {
	b.stopOnce.Do(func() {
		close(b.stopped)
		// A send that saw the lanes running may still be about to queue its call, or a
		// sendAll about to start its pipeline: wait for them (with stopped closed they do
		// not block), so that the workers' drain is the last word.
		b.sending.Lock()
		close(b.sealed)
		b.sending.Unlock()
	})
	b.wg.Wait()
	for _, l := range b.lanes {
		answerAll(take(nil, l.calls, cap(l.calls)), ErrStopped)
	}
}

// take appends to batch the calls queued in calls now, without waiting, until batch has n.
func take(batch []*Call, calls chan *Call, n int) []*Call {
	for len(batch) < n {
		select {
		case c := <-calls:
			batch = append(batch, c)
		default:
			return batch
		}
	}
	return batch
}

// sendAll runs calls in one pipeline of their own, on a goroutine of its own, so that a
// hung node holds up no one. Calls past their deadline are answered without being sent.
func (b *lanes) sendAll(calls []*Call) {
	b.sending.RLock()
	defer b.sending.RUnlock()
	select {
	case <-b.stopped:
		answerAll(calls, ErrStopped)
		return
	default:
	}
	// A copy: the caller's slice stays as it was.
	live, _ := dropExpired(append([]*Call(nil), calls...), time.Now(), 0)
	if len(live) == 0 {
		return
	}
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		ctx, cancel := valuesOnly(sharedValues(live)), context.CancelFunc(func() {})
		if d, ok := latestDeadline(live); ok {
			ctx, cancel = context.WithDeadline(ctx, d)
		}
		defer cancel()
		if b.acks != nil {
			b.runAcked(ctx, live)
			return
		}
		runPipeline(ctx, b.rdb, &b.seen, live)
	}()
}

func (b *lanes) work(l *lane) {
	defer b.wg.Done()
	defer func() { l.rt.timer.Stop() }()
	batch := make([]*Call, 0, maxBatch)
	for {
		select {
		case c := <-l.calls:
			batch = append(batch[:0], c)
		case <-b.sealed:
			l.run.Lock()
			b.drain(l, batch[:0])
			l.run.Unlock()
			return
		}
		l.run.Lock() // after a caller's own round trip, if one is under way
		batch = take(batch, l.calls, maxBatch)
		l.queued.Add(-int32(len(batch)))
		// A batch taken once Stop sealed the lane is the drain's, under its bound: the
		// select above may take a call although sealed is closed too.
		select {
		case <-b.sealed:
			b.drain(l, batch)
			l.run.Unlock()
			return
		default:
		}
		l.overran = b.exec(l, batch, time.Time{})
		l.run.Unlock()
		clear(batch)
	}
}

// drainTime bounds how long Stop goes on sending the calls queued before it, once the
// round trip in flight is over: time for a few round trips to a live server.
const drainTime = time.Second

// drain sends batch and the calls still queued when Stop sealed the lane, as work would,
// for up to drainTime: a call accepted before Stop, such as the release of an acquisition
// that landed during a Client's Close, is sent. A server that does not answer (down,
// paused) must not hold Stop up: once a round trip has outlasted its deadline (overran),
// the in-flight one included, and once drainTime has passed, the calls still queued are
// answered with ErrStopped, unsent. The context does not end a read on the socket (go-redis
// leaves that to ReadTimeout unless ContextTimeoutEnabled), so the round trip that overran
// ends by ReadTimeout, and nothing is sent after it.
//
// The caller holds l.run.
func (b *lanes) drain(l *lane, batch []*Call) {
	by := time.Now().Add(drainTime)
	for {
		batch = take(batch, l.calls, maxBatch)
		if len(batch) == 0 {
			return
		}
		if l.overran || !time.Now().Before(by) {
			answerAll(batch, ErrStopped)
			answerAll(take(nil, l.calls, cap(l.calls)), ErrStopped)
			return
		}
		l.overran = b.exec(l, batch, by)
		clear(batch)
		batch = batch[:0]
	}
}

// exec runs the batch: one call on its own (EVALSHA with EVAL fallback), several in one
// pipeline. Calls whose deadline has passed are answered without being sent. The round
// trip's context has the values of its calls' caller, if they have one (sharedValues),
// and ends by limit, unless zero. exec reports whether the round trip outlasted that
// context (the server did not answer in time); it cannot tell for calls without a
// deadline and without a limit. The caller holds l.run.
func (b *lanes) exec(l *lane, batch []*Call, limit time.Time) (overran bool) {
	rt := l.rt
	now := time.Now()
	live, _ := dropExpired(withBefore(batch), now, 0)
	if len(live) == 0 {
		return
	}
	values := sharedValues(live)
	var ctx context.Context
	d, ok := latestDeadline(live)
	if !limit.IsZero() && (!ok || limit.Before(d)) {
		d, ok = limit, true
	}
	if ok {
		ctx = rt.start(d, now, values)
		defer func() {
			if !rt.end() {
				overran = true
				l.rt = newRoundTrip()
			}
		}()
	} else {
		ctx = valuesOnly(values)
	}
	switch {
	case b.acks != nil:
		b.runAcked(ctx, live)
		return
	case len(live) == 1:
		c := live[0]
		c.Val, c.Err = b.seen.cmd(ctx, c, b.rdb).Int64()
		if c.Err != nil && redis.HasErrorPrefix(c.Err, "NOSCRIPT") {
			c.Val, c.Err = c.Script.Eval(ctx, b.rdb, c.Keys, c.Args...).Int64()
		}
		reloadOnFailure(b.rdb, live)
		c.Done <- c
		return
	}
	runPipeline(ctx, b.rdb, &b.seen, live)
	return
}

// pipeline runs calls in one pipeline on rdb and sends each on its Done channel. Calls that
// find the server's script cache empty (restart, SCRIPT FLUSH) were not run; their scripts
// are loaded once each and the calls sent again in one more pipeline, so that a restart
// costs two extra round trips, not one per call.
func pipeline(ctx context.Context, rdb redis.UniversalClient, calls []*Call) {
	runPipeline(ctx, rdb, nil, calls)
}

// runPipeline is pipeline with the scripts sn has not sent yet sent as EVAL (see seen).
func runPipeline(ctx context.Context, rdb redis.UniversalClient, sn *seen, calls []*Call) {
	missing := evalSha(ctx, rdb, sn, calls, false)
	if len(missing) == 0 {
		return
	}
	loaded := make(map[*redis.Script]bool)
	for _, c := range missing {
		if !loaded[c.Script] {
			loaded[c.Script] = true
			_ = c.Script.Load(ctx, rdb).Err() // on failure the calls fail below
		}
	}
	evalSha(ctx, rdb, nil, missing, true)
}

// evalSha runs calls in one pipeline and answers them, except those that failed with
// NOSCRIPT, which it returns unanswered unless last is set (then they are run one by one).
// The first call of a script sn has not sent goes as EVAL.
func evalSha(ctx context.Context, rdb redis.UniversalClient, sn *seen, calls []*Call, last bool) (missing []*Call) {
	pipe := rdb.Pipeline()
	cmds := make([]*redis.Cmd, len(calls))
	for i, c := range calls {
		cmds[i] = sn.cmd(ctx, c, pipe)
	}
	_, _ = pipe.Exec(ctx)
	for i, c := range calls {
		c.Val, c.Err = cmds[i].Int64()
		if last && c.Err != nil && redis.HasErrorPrefix(c.Err, "NOSCRIPT") {
			// Flushed again, or the load failed: EVAL sends the source itself.
			c.Val, c.Err = c.Script.Run(ctx, rdb, c.Keys, c.Args...).Int64()
		}
	}
	reloadOnFailure(rdb, calls) // before the calls are handed back
	notResent(calls)
	for _, c := range calls {
		if !last && isNoScript(c.Err) && !errors.Is(c.Err, errNotResent) {
			missing = append(missing, c)
			continue
		}
		c.Done <- c
	}
	return missing
}

// errNotResent is the error of a call that the server answered NOSCRIPT (its script cache
// flushed under the connection) while a call written behind it in the same pipeline ran.
var errNotResent = errors.New("dlock: not run: the server's script cache was flushed (NOSCRIPT), and calls written after this one already ran, so it is not sent again")

// notResent gives errNotResent to each call answered NOSCRIPT that a later call of the
// same hash slot (the same lock: dlock's keys of one lock share a slot) ran behind: sent
// again, it would run after calls written behind it, such as the release that undoes an
// acquire whose caller gave up on it, which would then hold the lock for a whole TTL. The
// other calls answered NOSCRIPT may be sent again; calls of other slots are independent
// (on a Cluster, other shards).
func notResent(calls []*Call) {
	if !slices.ContainsFunc(calls, func(c *Call) bool { return isNoScript(c.Err) }) {
		return // the usual round: no slot to hash, no map to make
	}
	ranAfter := make(map[int]bool, 1) // slots with a call that ran, from the end back
	for i := len(calls) - 1; i >= 0; i-- {
		c := calls[i]
		slot := keyspace.Slot(firstKey(c))
		switch {
		case isNoScript(c.Err) && ranAfter[slot]:
			c.Err = fmt.Errorf("%w (%w)", errNotResent, c.Err)
		case !isNoScript(c.Err) && (c.Err == nil || isRedisError(c.Err)):
			ranAfter[slot] = true
		}
	}
}

func firstKey(c *Call) string {
	if len(c.Keys) == 0 {
		return ""
	}
	return c.Keys[0]
}

func isNoScript(err error) bool { return err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") }

// isRedisError reports whether err is a reply of the server (redis.Nil included), so that
// the call ran there; a connection's error leaves that unknown.
func isRedisError(err error) bool {
	var re redis.Error
	return errors.As(err, &re)
}

// answerAll answers calls with err.
func answerAll(calls []*Call, err error) {
	for _, c := range calls {
		c.Val, c.Err = 0, err
		c.Done <- c
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

// asCluster is rdb as a Cluster client, or nil.
func asCluster(rdb redis.UniversalClient) *redis.ClusterClient {
	c, _ := rdb.(*redis.ClusterClient)
	return c
}
