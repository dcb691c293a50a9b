package engine

import (
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// NewMutex returns the engine of the Mutex called name; cfgErr is an invalid option.
func NewMutex(c *Client, name string, cfg LockConfig, cfgErr error) *Target {
	return newTarget(c, name, cfg, cfgErr, func(t *Target) scheme {
		return &mutexScheme{mutexKeys: newMutexKeys(t, mutexTurns(c))}
	})
}

// mutexScheme: a plain string key holding the holder's token (SET NX PX,
// compare-and-delete), shared in the process by hotKey.
type mutexScheme struct {
	plain
	*mutexKeys
}

// mutexKeys are the keys and constant arguments of a Mutex's scripts, made (and boxed) once
// per handle; an RWMutex writer releases as a Mutex does, with them. Read-only.
type mutexKeys struct {
	keys, releaseKeys       []string // acquire: lock, fence, turns, asks, gone; release: lock, turns, fence, asks, gone
	keyArgs, releaseKeyArgs []any
	channelArg              any
	turns                   bool // its releases pass the lock in turns (mutexTurns)
	turnIDArg               any  // this Client's id in the turn list, or "" with no turns
	turnsLifeArg            any  // how long a turn list outlives its last change, in ms
}

func newMutexKeys(t *Target, turns bool) *mutexKeys {
	k := t.keys
	s := &mutexKeys{
		keys:        []string{k.Lock, k.Fence, k.Turns, k.Asks, k.Gone},
		releaseKeys: []string{k.Lock, k.Turns, k.Fence, k.Asks, k.Gone},
		channelArg:  k.Channel,
		turns:       turns,
		turnIDArg:   noArg,
		// Waiters refresh the list at least once per holder's TTL (their expiry hint).
		turnsLifeArg: ms(max(3*t.cfg.TTL, time.Minute).Milliseconds()),
	}
	if turns {
		s.turnIDArg = t.c.id
	}
	s.keyArgs, s.releaseKeyArgs = boxed(s.keys), boxed(s.releaseKeys)
	return s
}

// turn is the turn length argument of a release: "" when the releases take no turns.
func (s *mutexKeys) turn(c *Client) any {
	if s.turns {
		return c.turn.arg
	}
	return noArg
}

func (*mutexScheme) kind() string { return KindMutex }

func (s *mutexScheme) sharing(t *Target) sharing {
	return &hotKey{queued: queued{t}, keys: s.mutexKeys, turns: s.turns}
}

func (s *mutexScheme) acquire(t *Target, r *request, a *ticket, call *batch.Call) {
	call.Script = scripts.MutexAcquire
	call.Keys, call.KeyArgs = s.keys, s.keyArgs
	stands := noArg
	if a.stands {
		stands = yesArg
	}
	call.Args = []any{a.token, t.ttlArg, a.reserve, s.turnIDArg, flagArg(!r.try), s.turnsLifeArg, askLifeArg, stands}
}

func (s *mutexScheme) release(t *Target, token any, publish string, call *batch.Call) {
	mutexRelease(s.mutexKeys, t.c, token, publish, releaseMode, noArg, call)
}

func (*mutexScheme) extend(t *Target, token any, ttl string, call *batch.Call) {
	mutexExtend(t, token, ttl, call)
}

// mutexRelease prepares mutex_release.lua on the keys of s: a release (mode releaseMode)
// of token, or a process that stops waiting (leaveMode, with its id as me and its
// request's token).
func mutexRelease(s *mutexKeys, c *Client, token any, publish string, mode, me any, call *batch.Call) {
	call.Script = scripts.MutexRelease
	call.Keys, call.KeyArgs = s.releaseKeys, s.releaseKeyArgs
	call.Args = []any{token, s.channelArg, publishArg(publish), s.turn(c), grantLengthArg, mode, me}
}

// mutexExtend prepares mutex_extend.lua: the extend of every kind whose lock key holds its
// holder's token.
func mutexExtend(t *Target, token any, ttl string, call *batch.Call) {
	call.Script = scripts.MutexExtend
	call.Keys, call.KeyArgs = t.extendKeys, t.extendKeyArgs
	call.Args = []any{token, ttl}
}

func (*mutexScheme) need(n int) int { return quorum.Majority(n) }

func (s *mutexScheme) channels(t *Target, r *request, n *Node) []notify.Channel {
	released := n.releaseChannel(t.keys.Channel)
	if k, ok := t.share.(*hotKey); ok && s.turns && !r.try {
		released.Route = k.route(r)
	}
	return []notify.Channel{released, n.keyspaceChannel(t.keys.Lock)}
}

func (*mutexScheme) policy() policy { return policy{reentrant: true, track: true} }

// mutexTurns reports whether the Mutexes of c take turns: on one deployment with a key
// prefix. With WithPrefix("") the keys are shared with Redlock clients of other
// libraries, which only ever SET NX: a release that passes the lock straight to a waiting
// dlock process would starve them, so bare keys take no turns. A MultiMutex release passes
// each name on with the same turns.
func mutexTurns(c *Client) bool { return len(c.nodes) == 1 && c.cfg.Prefix != "" }

// turnArg is the turn length argument of a release of c's locks: "" for no turns.
func turnArg(c *Client) any {
	if mutexTurns(c) {
		return c.turn.arg
	}
	return noArg
}
