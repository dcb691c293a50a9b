package engine

import (
	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// NewMutex returns the engine of the Mutex called name; cfgErr is an invalid option.
func NewMutex(c *Client, name string, cfg LockConfig, cfgErr error) *Target {
	return newTarget(c, mutexScheme{}, name, cfg, cfgErr)
}

// mutexScheme: a plain string key holding the holder's token (SET NX PX, compare-and-delete).
type mutexScheme struct{}

func (mutexScheme) kind() string { return KindMutex }

func (mutexScheme) acquire(t *Target, r *request, token any, call *batch.Call) {
	call.Script = scripts.MutexAcquire
	call.Keys, call.KeyArgs = t.mutexKeys, t.mutexKeyArgs
	stands := noArg
	if r.stands {
		stands = "1"
	}
	call.Args = []any{token, t.ttlArg, r.reserve, t.turnIDArg, flagArg(!r.try), t.turnsLifeArg, askLifeArg, stands}
}

func (mutexScheme) release(t *Target, token any, publish string, call *batch.Call) {
	mutexRelease(t, token, publish, releaseMode, noArg, call)
}

// mutexRelease prepares mutex_release.lua: a release (mode releaseMode) of token, or a
// process that stops waiting (leaveMode, with its id as me and its request's token).
func mutexRelease(t *Target, token any, publish string, mode, me any, call *batch.Call) {
	call.Script = scripts.MutexRelease
	call.Keys, call.KeyArgs = t.mutexReleaseKeys, t.mutexReleaseKeyArgs
	var turn any = noArg // an RWMutex writer's release comes here too: it takes no turns
	if t.coord.takesTurns() {
		turn = t.c.turn.arg
	}
	call.Args = []any{token, t.channelArg, publishArg(publish), turn, grantLengthArg, mode, me}
}

func (mutexScheme) extend(t *Target, token any, ttl string, call *batch.Call) {
	call.Script = scripts.MutexExtend
	call.Keys, call.KeyArgs = t.extendKeys, t.extendKeyArgs
	call.Args = []any{token, ttl}
}

func (mutexScheme) leave(*Target, *request, *batch.Call) bool { return false }
func (mutexScheme) need(n int) int                            { return quorum.Majority(n) }

func (mutexScheme) channels(t *Target, r *request, n *Node) []notify.Channel {
	released := n.releaseChannel(t)
	if t.coord.takesTurns() && !r.try {
		released.Route = t.coord.route(r)
	}
	return []notify.Channel{released, n.keyspaceChannel(t.keys.Lock)}
}

func (mutexScheme) policy() policy {
	return policy{reentrant: true, coordinate: hotKey, track: true}
}
