package engine

import (
	"slices"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// multiScheme: a Mutex's lock key and fencing counter for every name, all taken, renewed
// and released by one script (the names of one part share a hash slot).
type multiScheme struct {
	plain
	named []string        // in the order the scripts take them
	keys  []keyspace.Keys // of each name
	part  int             // the part's place in its MultiMutex's parts; -1 for the whole of it

	// Script keys and arguments, made (and boxed) once; read-only.
	lockKeys    []string // each name's lock key
	extendKeys  []string // each name's lock key, then the first's gone (multi_extend)
	acquireKeys []string // lock key and fencing counter of each name, then the first's gone (multi_acquire)
	releaseKeys []string // lock key, turn list, fencing counter, asks, gone of each (multi_release)
	fences      []string // each name's fencing counter (fence_raise)
	channelArgs []any    // each name's channel (multi_release)

	extendKeyArgs, acquireKeyArgs, releaseKeyArgs []any
}

func newMultiScheme(names []namedKeys, part int) *multiScheme {
	s := &multiScheme{part: part}
	for _, n := range names {
		k := n.keys
		s.named = append(s.named, n.name)
		s.keys = append(s.keys, k)
		s.lockKeys = append(s.lockKeys, k.Lock)
		s.acquireKeys = append(s.acquireKeys, k.Lock, k.Fence)
		s.releaseKeys = append(s.releaseKeys, k.Lock, k.Turns, k.Fence, k.Asks, k.Gone)
		s.fences = append(s.fences, k.Fence)
		s.channelArgs = append(s.channelArgs, k.Channel)
	}
	s.extendKeys = slices.Clone(s.lockKeys)
	if len(s.keys) > 0 { // a MultiMutex of no names returns that error, and runs no script
		s.acquireKeys = append(s.acquireKeys, s.keys[0].Gone)
		s.extendKeys = append(s.extendKeys, s.keys[0].Gone)
	}
	s.extendKeyArgs, s.acquireKeyArgs, s.releaseKeyArgs = boxed(s.extendKeys), boxed(s.acquireKeys), boxed(s.releaseKeys)
	return s
}

func (*multiScheme) kind() string { return KindMulti }

func (s *multiScheme) acquire(t *Target, _ *request, a *ticket, call *batch.Call) {
	s.acquireAbove(t, a.token, noFlagArg, call)
}

// acquireAbove is acquire with the smallest fencing token to give, as a decimal string
// ("0": none); multi_parts.go gives each part the largest token of the parts before it.
func (s *multiScheme) acquireAbove(t *Target, token, floor any, call *batch.Call) {
	call.Script = scripts.MultiAcquire
	call.Keys, call.KeyArgs = s.acquireKeys, s.acquireKeyArgs
	call.Args = []any{token, t.ttlArg, floor}
}

// release passes each name on as a Mutex release does, with the same turns.
func (s *multiScheme) release(t *Target, token any, publish string, call *batch.Call) {
	call.Script = scripts.MultiRelease
	call.Keys, call.KeyArgs = s.releaseKeys, s.releaseKeyArgs
	call.Args = append(append(make([]any, 0, 4+len(s.channelArgs)), token, publishArg(publish), turnArg(t.c), grantLengthArg), s.channelArgs...)
}

func (s *multiScheme) extend(_ *Target, token any, ttl string, call *batch.Call) {
	call.Script = scripts.MultiExtend
	call.Keys, call.KeyArgs = s.extendKeys, s.extendKeyArgs
	call.Args = []any{token, ttl}
}

func (*multiScheme) need(n int) int { return quorum.Majority(n) }

// channels are every name's release channel and keyspace channel: a MultiMutex takes no
// turns, and listens as a Mutex waiter does to each name (routeGrants: another process's
// turn or grant wakes it once that could have lapsed). Over several hash slots, only the
// part that refused the last attempt wakes it (request.waitPart): a part given back by a
// contender that waits for a later one must not wake another that waits for that later one
// too, or the two would take and give back the earlier part to each other at every round
// trip.
func (s *multiScheme) channels(t *Target, r *request, n *Node) []notify.Channel {
	route := routeGrants("", nil, t.c.turn.length+time.Millisecond, min(t.cfg.TTL, grantLength)+time.Millisecond)
	if s.part >= 0 {
		lapse, me := route, int32(s.part)+1
		route = func(payload string) time.Duration {
			if w := r.waitPart.Load(); w != 0 && w != me {
				return -1
			}
			return lapse(payload)
		}
	}
	out := make([]notify.Channel, 0, 2*len(s.keys))
	for _, k := range s.keys {
		keyspace := n.keyspaceChannel(k.Lock)
		keyspace.Route = route
		out = append(out, notify.Channel{Name: k.Channel, Sharded: n.cluster, Route: route}, keyspace)
	}
	return out
}

func (*multiScheme) policy() policy { return policy{} }

// exclusive, names and fenceKeys: every name's (a MultiMutex gives all its names one
// fencing token, above each name's earlier ones: multi_acquire.lua, and acquireParts over
// several slots).
func (s *multiScheme) exclusive(*Target) []string { return s.lockKeys }
func (s *multiScheme) names(*Target) []string     { return s.named }
func (s *multiScheme) fenceKeys(*Target) []string { return s.fences }
