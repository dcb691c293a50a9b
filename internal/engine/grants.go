package engine

import (
	"context"
	"time"

	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// Grants: a release that passes the lock straight to a waiting request. A Mutex release
// grants the standing request of the process whose turn it is (turns.go); a FairMutex
// release hands the lock to the next waiter of its queue (fair.go). Either publishes the
// grant (scripts.Message), and the grantee holds the lock without a round trip of its own.

// A claimer is a sharing whose attempts ask with a token that a release may grant: it
// knows which grants are to its caller (hotKey, claims).
type claimer interface {
	// granted returns what the caller r knows of a grant to token, if it is the token r
	// asks with.
	granted(r *request, token string) (grantee, bool)
	// used records that the request with token was granted: Redis took it off its list.
	used(token any)
}

// grantee is what a caller knows of the request a grant names.
type grantee struct {
	token  any           // the token it asks with
	sent   time.Time     // before the token was first sent: no grant of it came earlier
	length time.Duration // the shortest lease a grant of it may have set
	behind uint64        // local waiters queued behind the caller
}

// routeGrants is the Route of a waiter's channel: a grant to me sends its details on grants
// (without blocking: they have room) and wakes the waiter at once; a turn or a grant for
// someone else wakes it only once that could have lapsed (turnLapse, grantLapse); anything
// else wakes it at once.
func routeGrants(me string, grants chan<- scripts.Grant, turnLapse, grantLapse time.Duration) func(string) time.Duration {
	return func(payload string) time.Duration {
		m := scripts.ParseMessage(payload)
		switch {
		case m.Kind == scripts.Released:
		case m.To != me && m.Kind == scripts.Turn:
			return turnLapse
		case m.To != me:
			return grantLapse
		case m.Kind == scripts.Granted:
			select {
			case grants <- m.Grant:
			default:
			}
		}
		return 0
	}
}

// takeGrant returns the hold of a grant this caller received, if enough of the granted
// lease is left to be worth taking: else the next attempt, with the same token, confirms
// the grant and starts a fresh lease. The hold's start (Hold.startGranted) tells the
// observers of the hand-off.
//
// With replica acknowledgements, a grant is never taken as it is: the release that
// granted it was acknowledged for the releaser, whose Unlock alone would hear that it was
// not, so the grantee confirms it with an acknowledged attempt of its own (acks.go).
func takeGrant(lockCtx context.Context, r *request, k claimer) *Hold {
	t := r.t
	if t.c.cfg.Acks.On() {
		for len(r.grants) > 0 {
			<-r.grants
		}
		return nil
	}
	for {
		var g scripts.Grant
		select {
		case g = <-r.grants:
		default:
			return nil
		}
		me, ok := k.granted(r, g.Token)
		if !ok {
			continue // a grant for a request this caller no longer makes
		}
		length := min(t.cfg.TTL, me.length, grantLength)
		deadline := quorum.Deadline(me.sent, length, t.c.cfg.DriftFactor)
		if time.Until(deadline) < length/3 {
			return nil // asked long ago: confirm with an attempt instead
		}
		k.used(me.token) // the release took the request off the list
		return newHold(t, me.token, g.Counter-(g.Reserved-1), min(g.Reserved-1, me.behind), t.cfg.TTL, deadline, lockCtx)
	}
}
