package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// A MultiMutex locks several names all or none. Each name keeps a Mutex's own keys (lock
// key and fencing counter, keyspace.For), so a MultiMutex and a Mutex of the same name
// exclude each other. The names are taken in one fixed global order: by Redis Cluster hash
// slot, then by lock key. Names that share a slot (all of them, off a Cluster) are one
// part, taken, renewed and released by one script per node; on a Cluster the parts are
// taken one after the other in that order, and a part refused makes the attempt give back
// the parts it took before it waits (parts.go), so a MultiMutex never holds some names
// while it waits for others, and two of them over overlapping sets cannot deadlock.
//
// A MultiMutex of one part is a Target like any other, with multiScheme; one of several
// parts is a Target whose parts are one Target each, and the engine's steps run once per
// part where they ran once (acquireOnce, Target.releaseAbandoned, Hold.release,
// Hold.extend, renewBatch, watch).

// Multi is the engine of a MultiMutex.
type Multi struct {
	t *Target
}

// errNoNames is the error of a MultiMutex given no names.
var errNoNames = errors.New(`dlock: MultiMutex needs at least one name: give it the names to lock together, such as []string{"account:1", "account:2"}`)

// NewMultiMutex returns the engine of the MultiMutex of names; cfgErr is an invalid option.
// An empty list, an empty or invalid name or a name given twice is reported by every method.
func NewMultiMutex(c *Client, names []string, cfg LockConfig, cfgErr error) *Multi {
	named, err := nameKeys(c.cfg.Prefix, names)
	t := newMultiTarget(c, named, -1, cfg, cfgErr)
	t.name = strings.Join(names, ",")
	if cfgErr == nil {
		t.err = err
	}
	if t.err != nil {
		return &Multi{t: t}
	}
	if parts := slotParts(c, named); len(parts) > 1 {
		for i, part := range parts {
			t.parts = append(t.parts, newMultiTarget(c, part, i, cfg, nil))
		}
	}
	return &Multi{t: t}
}

// newMultiTarget returns the Target of the names (part of a MultiMutex's parts, -1 for
// none: the whole of it).
func newMultiTarget(c *Client, names []namedKeys, part int, cfg LockConfig, cfgErr error) *Target {
	first := ""
	if len(names) > 0 {
		first = names[0].name
	}
	return newTarget(c, newMultiScheme(names, part), first, cfg, cfgErr)
}

// namedKeys is a name and its keys.
type namedKeys struct {
	name string
	keys keyspace.Keys
	slot int
}

// nameKeys returns the names' keys in the order a MultiMutex takes them, or what is wrong
// with the names.
func nameKeys(prefix string, names []string) ([]namedKeys, error) {
	if len(names) == 0 {
		return nil, errNoNames
	}
	out := make([]namedKeys, len(names))
	seen := make(map[string]int, len(names))
	for i, name := range names {
		if j, dup := seen[name]; dup {
			return nil, fmt.Errorf("dlock: MultiMutex: %q is given twice (names[%d] and names[%d]): give each name once", name, j, i)
		}
		seen[name] = i
		k, err := keyspace.For(prefix, name)
		if err != nil {
			return nil, fmt.Errorf("dlock: MultiMutex names[%d]: %s", i, strings.TrimPrefix(err.Error(), "dlock: "))
		}
		out[i] = namedKeys{name: name, keys: k, slot: keyspace.Slot(k.Lock)}
	}
	slices.SortFunc(out, func(a, b namedKeys) int {
		return cmp.Or(cmp.Compare(a.slot, b.slot), strings.Compare(a.keys.Lock, b.keys.Lock))
	})
	return out, nil
}

// slotParts splits names (in order) into the runs that share a hash slot when a node of c
// is a Redis Cluster; elsewhere every key is reachable from one script, and they are one.
func slotParts(c *Client, names []namedKeys) [][]namedKeys {
	if !slices.ContainsFunc(c.nodes, func(n *Node) bool { return n.cluster }) {
		return [][]namedKeys{names}
	}
	var parts [][]namedKeys
	for i, start := 1, 0; i <= len(names); i++ {
		if i == len(names) || names[i].slot != names[start].slot {
			parts = append(parts, names[start:i])
			start = i
		}
	}
	return parts
}

// Lock acquires every name: one attempt if try is set, else waiting until ctx is done. A
// MultiMutex is not re-entrant: a ctx that carries a live lease of the same Client on one
// of its names is an error, since the Lock would wait for itself; for a try, one that
// wraps ErrNotAcquired, as the name is held.
func (m *Multi) Lock(ctx context.Context, try bool) (*Lease, error) {
	if m.t.err == nil {
		if name, ok := m.carried(ctx); ok {
			held := fmt.Sprintf("ctx carries a live lease on %q from this Client", name)
			if try {
				return nil, fmt.Errorf("dlock: MultiMutex %q: %w: %s, and a MultiMutex is not re-entrant", m.t.name, ErrNotAcquired, held)
			}
			return nil, fmt.Errorf("dlock: MultiMutex %q: %s: a MultiMutex is not re-entrant, and this Lock would wait for itself; %s", m.t.name, held, selfWaitAdvice)
		}
	}
	return m.t.Lock(ctx, try)
}

// Err is the error of invalid names or options, returned by every method.
func (m *Multi) Err() error { return m.t.err }

// Name is the names, joined by commas in the order given.
func (m *Multi) Name() string { return m.t.name }

// carried returns one of m's names that a live lease of m's Client in ctx holds alone
// (exclusiveKeys).
func (m *Multi) carried(ctx context.Context) (string, bool) {
	s := m.t.scheme.(*multiScheme)
	for h := range liveHolds(ctx, m.t.c) {
		for _, key := range exclusiveKeys(h) {
			if i := slices.Index(s.lockKeys, key); i >= 0 {
				return s.names[i], true
			}
		}
	}
	return "", false
}

// multiScheme: a Mutex's lock key and fencing counter for every name, all taken, renewed
// and released by one script (the names of one part share a hash slot).
type multiScheme struct {
	names []string        // in the order the scripts take them
	keys  []keyspace.Keys // of each name
	part  int             // the part's place in its MultiMutex's parts; -1 for the whole of it

	// Script keys and arguments, made (and boxed) once; read-only.
	lockKeys    []string // each name's lock key
	extendKeys  []string // each name's lock key, then the first's gone (multi_extend)
	acquireKeys []string // lock key and fencing counter of each name, then the first's gone (multi_acquire)
	releaseKeys []string // lock key, turn list, fencing counter, asks, gone of each (multi_release)
	fenceKeys   []string // each name's fencing counter (fence_raise)
	channelArgs []any    // each name's channel (multi_release)

	extendKeyArgs, acquireKeyArgs, releaseKeyArgs []any
}

func newMultiScheme(names []namedKeys, part int) *multiScheme {
	s := &multiScheme{part: part}
	for _, n := range names {
		k := n.keys
		s.names = append(s.names, n.name)
		s.keys = append(s.keys, k)
		s.lockKeys = append(s.lockKeys, k.Lock)
		s.acquireKeys = append(s.acquireKeys, k.Lock, k.Fence)
		s.releaseKeys = append(s.releaseKeys, k.Lock, k.Turns, k.Fence, k.Asks, k.Gone)
		s.fenceKeys = append(s.fenceKeys, k.Fence)
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

func (s *multiScheme) acquire(t *Target, _ *request, token any, call *batch.Call) {
	s.acquireAbove(t, token, noFlagArg, call)
}

// acquireAbove is acquire with the smallest fencing token to give, as a decimal string
// ("0": none); parts.go gives each part the largest token of the parts before it.
func (s *multiScheme) acquireAbove(t *Target, token, floor any, call *batch.Call) {
	call.Script = scripts.MultiAcquire
	call.Keys, call.KeyArgs = s.acquireKeys, s.acquireKeyArgs
	call.Args = []any{token, t.ttlArg, floor}
}

// release passes each name on as a Mutex release does, with the same turns.
func (s *multiScheme) release(t *Target, token any, publish string, call *batch.Call) {
	var turn any = noArg
	if mutexTurns(t.c) {
		turn = t.c.turn.arg
	}
	call.Script = scripts.MultiRelease
	call.Keys, call.KeyArgs = s.releaseKeys, s.releaseKeyArgs
	call.Args = append(append(make([]any, 0, 4+len(s.channelArgs)), token, publishArg(publish), turn, grantLengthArg), s.channelArgs...)
}

func (s *multiScheme) extend(_ *Target, token any, ttl string, call *batch.Call) {
	call.Script = scripts.MultiExtend
	call.Keys, call.KeyArgs = s.extendKeys, s.extendKeyArgs
	call.Args = []any{token, ttl}
}

func (*multiScheme) leave(*Target, *request, *batch.Call) bool { return false }
func (*multiScheme) need(n int) int                            { return quorum.Majority(n) }

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

func (*multiScheme) policy() policy { return policy{allOrNone: true} }

// fenceKeys are the fencing counters that an acquisition of t sets, which a quorum raises
// to the majority's token (settleFence): the lock's own, or every name's of a MultiMutex.
func fenceKeys(t *Target) []string {
	if s, ok := t.scheme.(*multiScheme); ok {
		return s.fenceKeys
	}
	return []string{t.keys.Fence}
}

// tokens is each name's fencing token of h (Lease.Tokens): the lock's name, or every name
// of a MultiMutex, with the hold's token. A MultiMutex gives all its names one token, above
// each name's earlier ones (multi_acquire.lua, and acquireParts over several slots).
func tokens(h *Hold) map[string]uint64 {
	s, ok := h.t.scheme.(*multiScheme)
	if !ok {
		return map[string]uint64{h.t.name: h.fence}
	}
	out := make(map[string]uint64, len(s.names))
	for _, name := range s.names {
		out[name] = h.fence
	}
	return out
}
