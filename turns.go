package dlock

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/quorum"
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
// most grantLength, and the new holder's first renewal extends it to the TTL. A process
// that died with a live request keeps the lock for at most grantLength.
//
// Without a live request (the process stopped refreshing it), the release gives the
// process the turn instead: for turnLength only it may take the free lock.
//
// Waiters of other processes are not woken by a grant or a turn that is not theirs: only
// when it could have lapsed. Turns need one deployment: independent quorum nodes would
// pass the lock to different processes, so a quorum Client takes no turns.

// turnLength is how long a released lock is kept for the process whose turn it is. That
// process was told by the release and normally asks within a round trip; the turn only
// lapses when it has died or stopped waiting without saying so. Each Client keeps its own
// (a turn), which tests change before they use it.
const turnLength = 20 * time.Millisecond

// A turn is a Client's turn length, and the same as a script argument (boxed once).
type turn struct {
	length time.Duration
	arg    any
}

func newTurn(d time.Duration) turn { return turn{length: d, arg: ms(d.Milliseconds())} }

// askReserve is how many fencing tokens a waiting process reserves in its standing
// request: enough for the goroutines that may queue behind its head until the grant.
const askReserve = 16

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
// gets the lock, and a time before it first sent it.
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

// turns reports whether t takes turns: a Mutex on one deployment, with a key prefix. With
// WithPrefix("") the keys are shared with Redlock clients of other libraries, which only
// ever SET NX: a release that passes the lock straight to a waiting dlock process would
// starve them, so bare keys take no turns.
func (t *target) turns() bool {
	return t.scheme.handsOff() && len(t.c.nodes) == 1 && t.c.cfg.prefix != ""
}

// prepareAttempt sets what a Mutex attempt tells Redis about this process: how many
// fencing tokens to reserve for the local waiters behind the caller and, for the head of
// the local queue, the token of the process's standing request (made on its first
// attempt). It returns the token to ask with, or nil for a fresh one.
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
	r.behind = int64(min(q.behind(r.local), maxReserve-1))
	r.reserve += r.behind
	if r.local == nil || r.try || !t.turns() {
		return nil
	}
	if q.ask == nil {
		// Its clock starts now, before the token is first sent: no grant of it can come
		// earlier.
		q.ask = &mutexAsk{token: newToken(), sent: time.Now()}
	} else if r.behind > 0 {
		// Waiting already, with others queued here: this attempt refreshes the standing
		// request, which a release may grant when more goroutines queue here than now.
		// Reserve for them: the hold hands off to no more than were queued when it was
		// taken, and the tokens left over are a gap.
		r.reserve = max(r.reserve, askReserve)
	}
	return q.ask.token
}

// attempted records an acquisition with token: if it was the process's standing request,
// the request is used up (the script took the process off the turn list).
func (t *target) attempted(token any) {
	if !t.turns() {
		return
	}
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	if q := c.queues[t.keys.Lock]; q != nil && q.ask != nil && q.ask.token == token {
		q.ask = nil
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
		token, sent, behind, ok := t.granted(r, parts[0])
		if !ok {
			continue // a grant for a request this caller no longer makes
		}
		length := min(t.cfg.ttl, grantLength)
		deadline := quorum.Deadline(sent, length, t.c.cfg.driftFactor)
		if time.Until(deadline) < length/3 {
			return nil // asked long ago: confirm with an attempt instead
		}
		t.attempted(token) // the release took the process off the list
		return t.newHold(token, top-(reserved-1), min(reserved-1, behind), deadline, lockCtx)
	}
}

// granted returns the token a grant to granted names, when this caller first sent it and
// how many local waiters are queued behind the caller, if it is the token the caller asks
// with.
func (t *target) granted(r *request, granted string) (token any, sent time.Time, behind uint64, ok bool) {
	if !t.scheme.handsOff() {
		return r.waiter, r.firstSent, 0, r.waiter == granted && !r.firstSent.IsZero()
	}
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	q := c.queues[t.keys.Lock]
	if q == nil || q.ask == nil || q.ask.token != any(granted) {
		return nil, time.Time{}, 0, false
	}
	return q.ask.token, q.ask.sent, uint64(q.behind(r.local)), true
}

// startGranted registers a granted hold like start. The grant set the key for at most
// grantLength; the first renewal, a third of the way into that, sets it to the TTL (a
// short hold, the common case on a hot lock, is released before it is due).
func (t *target) startGranted(h *hold) (*Lease, error) {
	if err := t.c.adopt(h); err != nil {
		h.cancel(ErrReleased)
		t.releaseAbandoned(h.token, true)
		return nil, err
	}
	length := min(t.cfg.ttl, grantLength)
	if !t.c.sched.Add(&h.entry, h.deadline.Add(-2*length/3), length/6, h.deadline) {
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
	t.c.sendAll(nil, t.c.turn.length, func(call *batch.Call) bool {
		mutexRelease(t, ask, t.c.nodes[call.Node].publishCommand(), leaveMode, t.turnIDArg, call)
		return true
	})
}
