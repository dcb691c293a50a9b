package dlock

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// Turns: how a hot Mutex goes round between processes.
//
// A release gives the lock to the process that has waited longest, not to whichever
// request lands first. A refused Lock puts its process at the back of the lock's turn list
// (once) with a standing request: the token it asks with, which it keeps across its
// attempts, and how many fencing tokens to reserve. The release script takes the first
// process of the list and, if its request is live, grants it at once: it sets the lock to
// the request's token and publishes the grant, so the process holds the lock without a
// round trip of its own. Its lease clock started before it first sent that token, which
// was before the grant, so the lease never outlasts the key; the grant sets the key for at
// most grantLength, and the new holder's first renewal, sent at once, extends it to the
// TTL. A process that died with a live request keeps the lock for at most grantLength.
//
// Without a live request (the process stopped refreshing it), the release gives the
// process the turn instead: for turnLength only it may take the free lock.
//
// Waiters of other processes are not woken by a grant or a turn that is not theirs: only
// when it could have lapsed. Turns need one deployment: independent quorum nodes would
// pass the lock to different processes, so a quorum Client takes no turns.

// turnLength is how long a released lock is kept for the process whose turn it is. That
// process was told by the release and normally asks within a round trip; the turn only
// lapses when it has died or stopped waiting without saying so. A variable for tests.
var (
	turnLength     = 20 * time.Millisecond
	turnArg    any = ms(turnLength.Milliseconds())
)

// grantLength bounds the lease that a release grants, and askLife is how long a standing
// request lives unless the process refreshes it, which it does every waiterRefresh while
// it waits.
const (
	grantLength = waiterTTL * time.Millisecond
	askLife     = waiterTTL * time.Millisecond
)

var (
	grantLengthArg any = ms(grantLength.Milliseconds())
	askLifeArg     any = ms(askLife.Milliseconds())
	releaseMode    any = "release"
	leaveMode      any = "leave"
)

// mutexAsk is this process's standing request for a Mutex: the token it asks with until it
// gets the lock, and when it first sent it.
type mutexAsk struct {
	token any // a hex string
	sent  time.Time
}

// turnID is this Client's id in the lock's turn list, or "" when it takes no turns.
func (t *target) turnID() string {
	if !t.turns() {
		return ""
	}
	return t.c.id
}

// turns reports whether t takes turns: a Mutex on one deployment.
func (t *target) turns() bool { return t.scheme.handsOff() && len(t.c.nodes) == 1 }

// prepareAttempt sets what a Mutex attempt tells Redis about this process: how many
// fencing tokens to reserve for the local waiters behind the caller, whether the process
// may be in the turn list, and, for the head of the local queue, the token of the
// process's standing request. It returns the token to ask with, or nil for a fresh one.
func (t *target) prepareAttempt(r *request) (token any) {
	r.reserve = 1
	if !t.scheme.handsOff() {
		return nil
	}
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[t.keys.Lock]
	if q == nil {
		return nil
	}
	behind := len(q.waiters)
	if r.local != nil {
		behind-- // the caller itself
	}
	r.reserve += int64(min(max(behind, 0), maxReserve-1))
	r.inTurns = q.inTurns
	if r.local == nil || r.try || !t.turns() {
		return nil
	}
	if q.ask == nil {
		q.ask = &mutexAsk{token: newToken()}
	}
	return q.ask.token
}

// attempted records what an attempt that started at start did to this process's place
// in the turns: a refused Lock joined the list with its standing request, an acquisition
// left it.
func (t *target) attempted(r *request, token any, start time.Time, acquired bool) {
	if !t.turns() {
		return
	}
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[t.keys.Lock]
	if q == nil {
		return
	}
	switch {
	case acquired:
		q.inTurns = false
		if q.ask != nil && q.ask.token == token {
			q.ask = nil
		}
	case !r.try:
		q.inTurns = true
		if q.ask != nil && q.ask.token == token && q.ask.sent.IsZero() {
			q.ask.sent = start
		}
	}
}

// takeGrant returns the hold of a grant this caller received (a Mutex release granted
// its process's standing request, or a FairMutex release handed it the lock), if enough
// of the granted lease is left to be worth taking: else the next attempt, with the same
// token, confirms the grant and starts a fresh lease.
func (t *target) takeGrant(r *request, lockCtx context.Context) *hold {
	for {
		var details string
		select {
		case details = <-r.grants:
		default:
			return nil
		}
		// details: token:counter:reserved
		parts := strings.Split(details, ":")
		if len(parts) != 3 {
			continue
		}
		top, err1 := strconv.ParseUint(parts[1], 10, 64)
		reserved, err2 := strconv.ParseUint(parts[2], 10, 64)
		if err1 != nil || err2 != nil || reserved < 1 || reserved > top {
			continue
		}
		token, sent, ok := t.granted(r, parts[0])
		if !ok {
			continue // a grant for a request this caller no longer makes
		}
		length := min(t.cfg.ttl, grantLength)
		deadline := quorum.Deadline(sent, length, t.c.cfg.driftFactor)
		if time.Until(deadline) < length/3 {
			return nil // asked long ago: confirm with an attempt instead
		}
		if t.scheme.handsOff() {
			t.attempted(r, token, sent, true) // the release took the process off the list
		}
		return t.newHold(token, top-(reserved-1), reserved-1, deadline, lockCtx)
	}
}

// granted returns the token a grant to granted names and when this caller first sent it,
// if it is the token the caller asks with.
func (t *target) granted(r *request, granted string) (token any, sent time.Time, ok bool) {
	if !t.scheme.handsOff() {
		return r.waiter, r.firstSent, r.waiter == granted && !r.firstSent.IsZero()
	}
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[t.keys.Lock]
	if q == nil || q.ask == nil || q.ask.sent.IsZero() || q.ask.token != any(granted) {
		return nil, time.Time{}, false
	}
	return q.ask.token, q.ask.sent, true
}

// startGranted registers a granted hold like start, and renews it at once: the grant set
// the key for at most grantLength, the renewal sets it to the TTL.
func (t *target) startGranted(h *hold) (*Lease, error) {
	if err := t.c.adopt(h); err != nil {
		h.cancel(ErrReleased)
		t.releaseAbandoned(h.token, true)
		return nil, err
	}
	if !t.c.sched.Add(&h.entry, time.Now(), 0, h.deadline) {
		h.end(ErrReleased, "the client was closed")
		t.releaseAbandoned(h.token, true)
		return nil, ErrClosed
	}
	return &h.outer, nil
}

// leaveTurns takes this process out of the lock's turns without waiting for the reply,
// passing the lock on if a release granted it meanwhile, or the turn if it had it: the
// last local waiter has given up. ask is the token of its standing request, or nil.
func (t *target) leaveTurns(ask any) {
	if ask == nil {
		ask = noArg
	}
	t.c.sendAll(nil, turnLength, func(call *batch.Call) bool {
		call.Script = scripts.MutexRelease
		call.Keys = t.mutexReleaseKeys
		call.Args = []any{ask, t.channelArg, publishArg(t.c.nodes[call.Node].publishCommand()),
			turnArg, grantLengthArg, leaveMode, t.turnIDArg}
		return true
	})
}
