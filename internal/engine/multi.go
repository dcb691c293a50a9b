package engine

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// A MultiMutex locks several names all or none. Each name keeps a Mutex's own keys (lock
// key and fencing counter, keyspace.For), so a MultiMutex and a Mutex of the same name
// exclude each other. The names are taken in one fixed global order: by Redis Cluster hash
// slot, then by lock key. Names that share a slot (all of them, off a Cluster) are one
// part, taken, renewed and released by one script per node; on a Cluster the parts are
// taken one after the other in that order, and a part refused makes the attempt give back
// the parts it took before it waits (multi_parts.go), so a MultiMutex never holds some names
// while it waits for others, and two of them over overlapping sets cannot deadlock.
//
// A MultiMutex of one part is a Target like any other, with multiScheme (multi_scheme.go);
// one of several parts is a Target whose parts are one Target each, which every step
// sends a call per part and node for, and which acquireParts (multi_parts.go) takes in
// order.

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
		t.parts = t.parts[:0]
		for i, part := range parts {
			t.parts = append(t.parts, newMultiTarget(c, part, i, cfg, nil))
		}
		t.attempt = acquireParts
	}
	return &Multi{t: t}
}

// newMultiTarget returns the Target of the names (part of a MultiMutex's parts, -1 for
// none: the whole of it). A hold lost on one name gives the others back rather than keep
// them until they expire: the hold is of all of them or none.
func newMultiTarget(c *Client, names []namedKeys, part int, cfg LockConfig, cfgErr error) *Target {
	first := ""
	if len(names) > 0 {
		first = names[0].name
	}
	t := newTarget(c, first, cfg, cfgErr, func(*Target) scheme { return newMultiScheme(names, part) })
	t.hooks.end = func(h *Hold, err error, reason string) {
		c.local.forget(h)
		if err == ErrLost {
			releaseAbandoned(h.t, h.token, true) // the names not lost are free again at once
		}
	}
	return t
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
				return nil, fmt.Errorf("dlock: MultiMutex %q: %w: %s, and a MultiMutex is not re-entrant", m.t.name, Inner(ErrNotAcquired), held)
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
		for _, key := range h.t.scheme.exclusive(h.t) {
			if i := slices.Index(s.lockKeys, key); i >= 0 {
				return s.named[i], true
			}
		}
	}
	return "", false
}
