package engine

import (
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

func (*mutexScheme) kind() string { return KindMutex }

func (s *mutexScheme) sharing(t *Target) sharing {
	return &hotKey{queued: queued{t}, turns: s.turns}
}

func (s *mutexScheme) acquire(t *Target, r *request, a *ticket, call *batch.Call) {
	call.Script = scripts.MutexAcquire
	call.Keys, call.KeyArgs = s.keys, s.keyArgs
	stands := noArg
	if a.stands {
		stands = yesArg
	}
	call.Args = append(call.Args[:0], a.token, t.ttlArg, a.reserve, s.turnIDArg, flagArg(!r.try), s.turnsLifeArg, askLifeArg, stands)
}

func (s *mutexScheme) release(t *Target, token any, publish string, call *batch.Call) {
	mutexRelease(s.mutexKeys, t.c, token, publish, releaseMode, noArg, call)
}

func (*mutexScheme) extend(t *Target, token any, ttl string, call *batch.Call) {
	mutexExtend(t, token, ttl, call)
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
