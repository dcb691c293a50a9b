package engine

import (
	"context"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// A coordinator is how the goroutines of this process share one lock key. The engine calls
// its hooks at fixed points of a Lock (around the wait, before an attempt, after the
// verdict, on release) and a nil coordinator (kinds that coordinate alone: readers,
// FairMutex, Semaphore) does nothing at any of them, so those kinds can be read and changed
// without this file.
//
// Local queue (localqueue.go): goroutines of one process that wait for the key queue in
// order, and only the head asks Redis, so any number of local waiters cost one request per
// release. Mutexes and RWMutex writers queue locally.
//
// Hand-off (Mutex): Unlock hands the hold to the next goroutine waiting in the local
// queue, without a round trip: the lock key keeps this process's token in Redis the whole
// time, so to every other process it is one hold that lasted longer; the successor inherits
// the deadline and the renewal. It gets its own fencing token from a block reserved when
// the lock was taken (INCRBY instead of INCR, one token per local waiter then queued), so
// its token is above its predecessor's and below any later acquisition's. The block bounds
// the hand-offs to one round of the local queue as it was when the lock was taken:
// goroutines that queued later go through Redis, where other processes get their turn.
//
// Turns (Mutex on one deployment): a release gives the lock to the process that has
// waited longest, not to whichever request lands first. A Lock refused again (its first
// attempt does not stand, so an uncontended Lock writes no request) puts its process at
// the back of the lock's turn list (once) with a standing request (mutex_asks.lua): the
// token it asks with, which it keeps across its attempts, and how many fencing tokens to
// reserve. The release script takes the first process of the list and, if its request is
// live, grants it at once: it sets the lock to the request's token and publishes the grant
// (grants.go), so the process holds the lock without a round trip of its own. Its lease clock started
// before it first sent that token, which was before the grant, so the lease never outlasts
// the key; the grant sets the key for at most grantLength, and the new holder's first
// renewal extends it to the TTL. A process that died with a live request keeps the lock
// for at most grantLength. Without a live request (the process stopped refreshing it), the
// release gives the process the turn instead: for turnLength only it may take the free
// lock. Waiters of other processes are not woken by a grant or a turn that is not theirs:
// only when it could have lapsed. Turns need one deployment: independent quorum nodes
// would pass the lock to different processes, so a quorum Client takes no turns.
type coordinator struct {
	t *Target
	// handsOff (Mutex): Unlock hands the hold to the next local waiter, and attempts
	// reserve fencing tokens for that.
	handsOff bool
	// turns: handsOff on one deployment with a key prefix. With WithPrefix("") the keys
	// are shared with Redlock clients of other libraries, which only ever SET NX: a release
	// that passes the lock straight to a waiting dlock process would starve them, so bare
	// keys take no turns.
	turns bool
}

func newCoordinator(t *Target) *coordinator {
	switch t.policy.coordinate {
	case alone:
		return nil
	case queueLocally:
		return &coordinator{t: t}
	case hotKey:
		return &coordinator{t: t, handsOff: true, turns: mutexTurns(t.c)}
	}
	return nil
}

// mutexTurns reports whether a Mutex of c takes turns (see coordinator.turns); a
// MultiMutex release passes each name on with the same turns.
func mutexTurns(c *Client) bool { return len(c.nodes) == 1 && c.cfg.Prefix != "" }

// maxReserve bounds the fencing tokens reserved for hand-offs by one acquisition.
const maxReserve = 64

// askReserve is how many fencing tokens a waiting process reserves in its standing
// request: enough for the goroutines that may queue behind its head until the grant.
const askReserve = 16

// mutexAsk is this process's standing request for a Mutex: the token it asks with until it
// gets the lock, and a time before it first sent it. Redis makes the token a tombstone
// once it is served or left (gone.lua), so that an attempt of an older request that lands
// late does not stand again.
type mutexAsk struct {
	token any // a hex string
	sent  time.Time
	// shortest (guarded by Client.mu) is the shortest TTL any attempt of it carried: a
	// grant sets the key for the TTL of the last attempt that landed, which may be any
	// of them, one that lands late included (handles of one name with different TTLs
	// share the request).
	shortest time.Duration
}

// takesTurns reports whether releases pass the lock between processes in turns.
func (k *coordinator) takesTurns() bool { return k != nil && k.turns }

// turnID is this Client's id in the lock's turn list, or "" when it takes no turns.
func (k *coordinator) turnID() string {
	if !k.takesTurns() {
		return ""
	}
	return k.t.c.id
}

// Around the wait.

// join queues the caller locally and waits until it is the head; it returns the error
// that ended the wait (ctx's, or ErrClosed). The caller calls leave afterwards, whatever
// join returned.
func (k *coordinator) join(ctx context.Context, r *request) error {
	if k == nil {
		return nil
	}
	r.local = &r.wait
	k.t.c.join(k.t.keys.Lock, ctx, k.t.cfg, r.local)
	select {
	case <-r.local.turn:
		return nil
	case <-ctx.Done():
		return k.t.gaveUp(ctx, -1)
	case <-k.t.c.done:
		return ErrClosed
	}
}

// leave takes the caller out of the local queue, whatever the wait came to. A hold handed
// over as the caller gave up is passed on or released; the last local waiter of a process
// with a standing request takes the process out of the turns.
func (k *coordinator) leave(ctx context.Context, r *request) {
	if k == nil {
		return
	}
	c := k.t.c
	untaken, leaveTurns, ask := c.leave(k.t.keys.Lock, r.local)
	if untaken != nil {
		release, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.nodeTimeout(k.t.cfg.TTL))
		_ = untaken.release(release)
		cancel()
	}
	if leaveTurns {
		k.leaveTurns(ask)
	}
}

// leaveTurns takes this process out of the lock's turns without waiting for the reply,
// passing the lock on if a release granted it meanwhile, or the turn if it had it: the
// last local waiter has given up. ask is its standing request.
func (k *coordinator) leaveTurns(ask *mutexAsk) {
	t := k.t
	sendEvery(t.c, t.c.turn.length, func(call *batch.Call) bool {
		mutexRelease(t, ask.token, t.c.nodes[call.Node].PublishCommand(), leaveMode, t.turnIDArg, call)
		return true
	})
}

// dropAsk forgets this process's standing request, which Redis says was served or left
// (gone.lua): the next attempt makes a new one.
func (k *coordinator) dropAsk() {
	if !k.takesTurns() {
		return
	}
	c := k.t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.queues[k.t.keys.Lock]; q != nil {
		q.ask = nil
	}
}

// Before an attempt.

// takeHandoff returns the hold handed to the caller, if any; the caller now owns it.
func (k *coordinator) takeHandoff(r *request) *Hold {
	if k == nil {
		return nil
	}
	return handedOff(k.t.c.takeHandoff(r.local), true)
}

// heldHere returns this process's live hold of the key, or nil.
func (k *coordinator) heldHere() *Hold {
	if k == nil {
		return nil
	}
	c := k.t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.queues[k.t.keys.Lock]; q != nil {
		return q.held
	}
	return nil
}

// changed returns a channel closed when this process's hold of the key ends or is handed
// to the head of the local queue. When this process holds no hold of the key it returns
// nil (never ready), unless always is set. A hold handed to the caller since it last looked
// counts as a change: the channel is then closed already, so that the caller takes the
// hold rather than wait for its end.
func (k *coordinator) changed(r *request, always bool) <-chan struct{} {
	if k == nil {
		return nil
	}
	c := k.t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if r.local != nil && r.local.handed != nil {
		return closedChan
	}
	q := c.queueLocked(k.t.keys.Lock)
	if q.held == nil && !always {
		return nil
	}
	return q.signalLocked()
}

// prepare sets what a Mutex attempt tells Redis about this process: how many fencing
// tokens to reserve for the local waiters behind the caller (r.reserve, r.behind) and, for
// the head of the local queue, the token of the process's standing request (made on its
// first attempt). It returns the token to ask with, or nil for none.
func (k *coordinator) prepare(r *request) (ask any) {
	if k == nil || !k.handsOff {
		return nil
	}
	c := k.t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[k.t.keys.Lock]
	if q == nil {
		return nil
	}
	r.behind = int64(min(q.behind(r.local), maxReserve-1))
	r.reserve += r.behind
	if r.local == nil || r.try || !k.turns {
		return nil
	}
	if q.ask == nil {
		// Its clock starts now, before the token is first sent: no grant of it can come
		// earlier. Its first attempt does not stand (r.stands is false): an uncontended
		// Lock leaves no request behind.
		q.ask = &mutexAsk{token: newToken(), sent: time.Now(), shortest: k.t.cfg.TTL}
		return q.ask.token
	} else if r.behind > 0 {
		// Waiting already, with others queued here: this attempt refreshes the standing
		// request, which a release may grant when more goroutines queue here than now.
		// Reserve for them: the hold hands off to no more than were queued when it was
		// taken, and the tokens left over are a gap.
		r.reserve = max(r.reserve, askReserve)
	}
	r.stands = true // from now on (mutex_asks.lua)
	q.ask.shortest = min(q.ask.shortest, k.t.cfg.TTL)
	return q.ask.token
}

// After the verdict.

// acquired records an acquisition with token whose fencing counter came back as counter,
// and returns the hold's fencing token and how many hand-offs it may make. The block
// reserved is the r.reserve values up to counter; the hold hands off to at most the
// r.behind waiters queued now (one round), with the lowest tokens.
func (k *coordinator) acquired(r *request, token any, counter uint64) (fence, spare uint64) {
	k.used(token)
	if k == nil || uint64(r.reserve) <= 1 {
		return counter, 0
	}
	fence = counter - uint64(r.reserve-1)
	if counter < uint64(r.reserve) {
		fence = counter // a counter someone set below the reservation
	}
	return fence, min(uint64(r.behind), counter-fence)
}

// used records that the standing request with token, if it is the process's, is used up:
// the script that granted it took the process off the turn list.
func (k *coordinator) used(token any) {
	if !k.takesTurns() {
		return
	}
	c := k.t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.queues[k.t.keys.Lock]; q != nil && q.ask != nil && q.ask.token == token {
		q.ask = nil
	}
}

// granted returns the token of the process's standing request when a grant names it, with
// when it was first sent, the shortest lease a grant of it may have set, and how many
// local waiters are queued behind the caller.
func (k *coordinator) granted(r *request, token string) (g grantee, ok bool) {
	c := k.t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[k.t.keys.Lock]
	if q == nil || q.ask == nil || q.ask.token != any(token) {
		return grantee{}, false
	}
	return grantee{q.ask.token, q.ask.sent, q.ask.shortest, uint64(q.behind(r.local))}, true
}

// route is the Route of the lock's release channel for a waiter that takes turns: the lock
// passed to another process wakes it only once that could have lapsed; a grant to this one
// comes with its details.
func (k *coordinator) route(r *request) func(payload string) time.Duration {
	c := k.t.c
	return routeGrants(c.id, r.grants, c.turn.length+time.Millisecond, min(k.t.cfg.TTL, grantLength)+time.Millisecond)
}

// On release.

// handOff passes h, which Unlock is ending, to the next goroutine of this process waiting
// for the lock, and reports whether it did (see Hold.handOn for when it does not).
func (k *coordinator) handOff(h *Hold) bool {
	if k == nil || !k.handsOff {
		return false
	}
	return h.handOn(func(ttl time.Duration, deadline time.Time) *Hold { return k.handTo(h, ttl, deadline) })
}

// handTo makes h's successor and hands it to the head of the local queue, or returns nil
// when there is no one to hand it to.
func (k *coordinator) handTo(h *Hold, ttl time.Duration, deadline time.Time) *Hold {
	t, c := k.t, k.t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[t.keys.Lock]
	if c.closed || q == nil || q.held != h || len(q.waiters) == 0 || q.waiters[0].cfg != t.cfg {
		// A waiter that locked a handle with other options (TTL, NoRenew) asks Redis for
		// a lease of its own making.
		return nil
	}
	w := q.waiters[0]
	next := newHold(t, h.token, h.fence+1, h.spare-1, ttl, deadline, w.ctx)
	c.holds[next] = struct{}{}
	q.held = next
	w.handed = next
	q.notifyLocked()
	return next
}
