package engine

import (
	"context"
	"time"
)

// hotKey is the Mutex's sharing (sharing.go): the local queue of queued, plus hand-off and
// turns.
//
// Hand-off: Unlock hands the hold to the next goroutine waiting in the local queue,
// without a round trip: the lock key keeps this process's token in Redis the whole time,
// so to every other process it is one hold that lasted longer; the successor inherits the
// deadline and the renewal. It gets its own fencing token from a block reserved when the
// lock was taken (INCRBY instead of INCR, one token per local waiter then queued), so its
// token is above its predecessor's and below any later acquisition's. The block bounds
// the hand-offs to one round of the local queue as it was when the lock was taken:
// goroutines that queued later go through Redis, where other processes get their turn.
//
// Turns (turns.go): on one deployment, the head of the local queue asks with the
// process's standing request, which a release may grant (grants.go).
type hotKey struct {
	queued
	turns bool // mutexTurns
}

// maxReserve bounds the fencing tokens reserved for hand-offs by one acquisition.
const maxReserve = 64

// askReserve is how many fencing tokens a waiting process reserves in its standing
// request: enough for the goroutines that may queue behind its head until the grant.
const askReserve = 16

// fromProcess returns a hold handed over by a local Unlock, or one a release granted to
// the process's standing request.
func (k *hotKey) fromProcess(ctx context.Context, r *request) (*Hold, bool) {
	if h := k.t.c.local.takeHandoff(k.t.keys.Lock, r.local); h != nil {
		return handedOff(h, true), false
	}
	h := takeGrant(ctx, r, k)
	return h, h != nil
}

// rejoin forgets this process's standing request, which Redis says was served or left
// (gone.lua): the next attempt makes a new one.
func (k *hotKey) rejoin() {
	if !k.turns {
		return
	}
	s := k.t.c.local.lock(k.t.keys.Lock)
	defer s.mu.Unlock()
	if q := s.queues[k.t.keys.Lock]; q != nil {
		q.ask = nil
	}
}

func (k *hotKey) refreshes() bool { return k.turns }

// prepare sets what a Mutex attempt tells Redis about this process: how many fencing
// tokens to reserve for the local waiters behind the caller and, for the head of the local
// queue, the token of the process's standing request (made on its first attempt).
func (k *hotKey) prepare(r *request) {
	r.tk = ticket{reserve: 1}
	s := k.t.c.local.lock(k.t.keys.Lock)
	defer s.mu.Unlock()
	q := s.queues[k.t.keys.Lock]
	if q != nil {
		r.tk.behind = int64(min(q.behind(r.local), maxReserve-1))
		r.tk.reserve += r.tk.behind
	}
	if q == nil || r.local == nil || r.try || !k.turns {
		r.tk.token = k.t.c.newToken()
		return
	}
	r.tk.claim = true
	if q.ask == nil {
		// Its clock starts now, before the token is first sent: no grant of it can come
		// earlier. Its first attempt does not stand: an uncontended Lock leaves no request
		// behind.
		q.ask = &mutexAsk{token: k.t.c.newToken(), sent: time.Now(), shortest: k.t.cfg.TTL}
		r.tk.token = q.ask.token
		return
	} else if r.tk.behind > 0 {
		// Waiting already, with others queued here: this attempt refreshes the standing
		// request, which a release may grant when more goroutines queue here than now.
		// Reserve for them: the hold hands off to no more than were queued when it was
		// taken, and the tokens left over are a gap.
		r.tk.reserve = max(r.tk.reserve, askReserve)
	}
	r.tk.stands = true // from now on (mutex_asks.lua)
	q.ask.shortest = min(q.ask.shortest, k.t.cfg.TTL)
	r.tk.token = q.ask.token
}

// acquired returns the hold's fencing token and how many hand-offs it may make. The block
// reserved is the reserve values up to counter; the hold hands off to at most the waiters
// queued behind the caller now (one round), with the lowest tokens.
func (k *hotKey) acquired(r *request, counter uint64) (fence, spare uint64) {
	k.used(r.tk.token)
	if uint64(r.tk.reserve) <= 1 {
		return counter, 0
	}
	fence = counter - uint64(r.tk.reserve-1)
	if counter < uint64(r.tk.reserve) {
		fence = counter // a counter someone set below the reservation
	}
	return fence, min(uint64(r.tk.behind), counter-fence)
}

// used records that the standing request with token, if it is the process's, is used up:
// the script that granted it took the process off the turn list.
func (k *hotKey) used(token any) {
	if !k.turns {
		return
	}
	s := k.t.c.local.lock(k.t.keys.Lock)
	defer s.mu.Unlock()
	if q := s.queues[k.t.keys.Lock]; q != nil && q.ask != nil && q.ask.token == token {
		q.ask = nil
	}
}

// granted returns the process's standing request when a grant names its token (claimer).
func (k *hotKey) granted(r *request, token string) (g grantee, ok bool) {
	s := k.t.c.local.lock(k.t.keys.Lock)
	defer s.mu.Unlock()
	q := s.queues[k.t.keys.Lock]
	if q == nil || q.ask == nil || q.ask.token != any(token) {
		return grantee{}, false
	}
	return grantee{q.ask.token, q.ask.sent, q.ask.shortest, uint64(q.behind(r.local))}, true
}

// route is the Route of the lock's release channel for a waiter that takes turns: the lock
// passed to another process wakes it only once that could have lapsed; a grant to this one
// comes with its details.
func (k *hotKey) route(r *request) func(payload string) time.Duration {
	c := k.t.c
	return routeGrants(c.id, r.grants, c.turn.length+time.Millisecond, min(k.t.cfg.TTL, grantLength)+time.Millisecond)
}

// handOff passes h, which Unlock is ending, to the next goroutine of this process waiting
// for the lock, and reports whether it did (see Hold.handOn for when it does not).
func (k *hotKey) handOff(h *Hold) bool {
	return h.handOn(func(ttl time.Duration, deadline time.Time) *Hold { return k.handTo(h, ttl, deadline) })
}

// handTo makes h's successor and hands it to the head of the local queue, or returns nil
// when there is no one to hand it to.
func (k *hotKey) handTo(h *Hold, ttl time.Duration, deadline time.Time) *Hold {
	t := k.t
	s := t.c.local.lock(t.keys.Lock)
	defer s.mu.Unlock()
	q := s.queues[t.keys.Lock]
	if s.closed || q == nil || q.held != h || len(q.waiters) == 0 || q.waiters[0].cfg != t.cfg {
		// A waiter that locked a handle with other options (TTL, NoRenew) asks Redis for
		// a lease of its own making.
		return nil
	}
	w := q.waiters[0]
	next := newHold(t, h.token, h.fence+1, h.spare-1, ttl, deadline, w.ctx)
	s.holdLocked(next)
	q.held = next
	w.handed = next
	q.notifyLocked()
	return next
}
