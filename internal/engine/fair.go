package engine

import (
	"context"
	"errors"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// errFairQuorum is the error of a FairMutex on a quorum Client.
var errFairQuorum = errors.New("dlock: FairMutex needs a single Redis deployment: independent quorum nodes cannot agree on one queue order without consensus; use Mutex on a quorum, or a FairMutex on one deployment (standalone, Sentinel or Cluster)")

// NewFairMutex returns the engine of the FairMutex called name; cfgErr is an invalid
// option. On a quorum Client every method returns an error.
func NewFairMutex(c *Client, name string, cfg LockConfig, cfgErr error) *Target {
	t := newTarget(c, name, cfg, cfgErr, func(t *Target) scheme {
		return &fairScheme{keys: []string{t.keys.Lock, t.keys.Fence, t.keys.Queue(), t.keys.QueueDeadlines(), t.keys.Gone}}
	})
	if t.err == nil && len(c.nodes) > 1 {
		t.err = errFairQuorum
	}
	return t
}

// fairScheme: the lock key of a Mutex plus a queue of waiter tokens and their deadlines.
type fairScheme struct {
	plain
	keys []string // lock, fence, queue, queue deadlines, gone; read-only
}

func (*fairScheme) kind() string { return KindFair }

func (s *fairScheme) acquire(t *Target, r *request, a *ticket, call *batch.Call) {
	call.Script = scripts.FairAcquire
	call.Keys = s.keys
	call.Args = []any{a.token, t.ttlArg, waiterTTLArg, flagArg(r.try)}
}

func (s *fairScheme) release(t *Target, token any, publish string, call *batch.Call) {
	s.fairRelease(t, token, publish, releaseMode, call)
}

// fairRelease prepares fair_release.lua: a release (mode releaseMode) of token, or a waiter
// that gives up (leaveMode).
func (s *fairScheme) fairRelease(t *Target, token any, publish string, mode any, call *batch.Call) {
	if publish == "" {
		publish = t.c.nodes[call.Node].PublishCommand() // a hand-over always tells its waiter
	}
	call.Script = scripts.FairRelease
	call.Keys = s.keys
	call.Args = []any{token, waiterTTLArg, t.keys.GrantedPrefix(), publishArg(publish), mode}
}

func (*fairScheme) extend(t *Target, token any, ttl string, call *batch.Call) {
	mutexExtend(t, token, ttl, call)
}

func (s *fairScheme) leave(t *Target, r *request, call *batch.Call) bool {
	s.fairRelease(t, r.waiter, "", leaveMode, call)
	return true
}

func (*fairScheme) need(n int) int { return quorum.Majority(n) }

func (*fairScheme) channels(t *Target, r *request, n *Node) []notify.Channel {
	name, shared := grantChannel(t, r.waiter)
	return []notify.Channel{
		// The hand-over comes with its details: the waiter holds the lock at once.
		{Name: name, Sharded: n.cluster, Once: !shared, Route: routeFair(r.waiter, r.grants)},
		n.keyspaceChannel(t.keys.Lock),
	}
}

// grantChannel is the channel a grant to waiter is published on (grant_channel.lua): its
// Client's, shared with the Client's other waiters of the lock, or for a waiter id without
// a Client id (WithOwner("")) its own.
func grantChannel(t *Target, waiter string) (name string, shared bool) {
	if id, ok := keyspace.ClientOf(waiter); ok {
		return t.keys.GrantedPrefix() + id, true
	}
	return t.keys.GrantedPrefix() + waiter, false
}

// routeFair is the Route of the grant channel of waiter me: a grant to me sends its
// details on grants (without blocking: they have room) and wakes me at once; a grant to
// another waiter of the Client is not for me at all; anything else (a forced unlock's
// "granted") wakes me, to ask Redis.
func routeFair(me string, grants chan<- scripts.Grant) func(string) time.Duration {
	return func(payload string) time.Duration {
		m := scripts.ParseMessage(payload)
		switch {
		case m.Kind != scripts.Granted:
		case m.To != me:
			return -1
		default:
			select {
			case grants <- m.Grant:
			default:
			}
		}
		return 0
	}
}

// A FairMutex waiter listens before its first attempt where its Client's channel is
// subscribed already (policy.listenFirst), so that its refusal needs no look again.
func (*fairScheme) policy() policy {
	return policy{waitList: true, reentrant: true, listenFirst: true}
}

func (*fairScheme) sharing(*Target) sharing { return claims{} }

// claims is the FairMutex's sharing (sharing.go): each waiter asks Redis on its own, with
// its waiter id, which a release may hand the lock to while the attempt is out: so an
// attempt is never undone, only left (a waiter that gives up leaves, which passes on what
// it was given), and the waiter takes a grant to its id without an attempt (grants.go).
type claims struct{ alone }

func (claims) prepare(r *request) {
	if r.firstSent.IsZero() {
		r.firstSent = time.Now() // a hand-over to the id happens after its first attempt
	}
	r.tk = ticket{token: r.waiter, claim: true, reserve: 1}
}

func (k claims) fromProcess(ctx context.Context, r *request) (*Hold, bool) {
	h := takeGrant(ctx, r, k)
	return h, h != nil
}

// granted: a grant to the waiter's own id, once its first attempt was sent.
func (claims) granted(r *request, token string) (grantee, bool) {
	return grantee{r.waiter, r.firstSent, grantLength, 0}, r.waiter == token && !r.firstSent.IsZero()
}

func (claims) used(any) {}
