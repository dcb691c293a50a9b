package dlockprom

import "sync"

// seriesKey is a name label, a kind and an owner label ("" without WithOwnerLabel).
type seriesKey struct{ name, kind, owner string }

// labels maps the events' lock names, kinds and owners to their series, within the bounds
// on distinct name and owner labels. Once a label has series it keeps them; a name or
// owner that came after its bound is full is never stored, so memory stays bounded too.
// The bounds are apart: a name counts once against maxNames whatever its owners, so the
// series of a kind stay within (maxNames+1)×(maxOwners+1) label pairs.
type labels struct {
	nameLabel  func(string) string // nil: the name itself
	maxNames   int
	ownerLabel bool
	maxOwners  int
	m          *metrics

	// mu guards series, names and owners. Lookups of known keys, the common case, share it.
	mu     sync.RWMutex
	series map[seriesKey]*series
	names  map[string]struct{} // the name labels given so far, OtherName excepted
	owners map[string]struct{} // the owner labels given so far, "" and OtherName excepted
}

func newLabels(cfg config, m *metrics) *labels {
	return &labels{
		nameLabel:  cfg.nameLabel,
		maxNames:   cfg.maxNames,
		ownerLabel: cfg.ownerLabel,
		maxOwners:  cfg.maxOwners,
		m:          m,
		series:     make(map[seriesKey]*series),
		names:      make(map[string]struct{}),
		owners:     make(map[string]struct{}),
	}
}

// get returns the series of a lock's name, kind and owner, making it on the first event
// of a name label, kind and owner label.
func (l *labels) get(name, kind, owner string) *series {
	if l.nameLabel != nil {
		name = l.nameLabel(name)
	}
	if name == "" {
		name = OtherName
	}
	if !l.ownerLabel {
		owner = ""
	}
	key := seriesKey{name, kind, owner}
	l.mu.RLock()
	s := l.series[key]
	if s == nil {
		key = l.bounded(key)
		s = l.series[key]
	}
	l.mu.RUnlock()
	if s != nil {
		return s
	}
	return l.add(key)
}

// bounded returns key with OtherName for a name or owner that gets no label of its own:
// it has none, and its bound is reached. l.mu must be held.
func (l *labels) bounded(key seriesKey) seriesKey {
	if overflows(l.names, l.maxNames, key.name) {
		key.name = OtherName
	}
	if key.owner != "" && overflows(l.owners, l.maxOwners, key.owner) {
		key.owner = OtherName
	}
	return key
}

// overflows reports whether v is not among given, and given has reached its bound.
func overflows(given map[string]struct{}, bound int, v string) bool {
	if v == OtherName {
		return false
	}
	_, known := given[v]
	return !known && len(given) >= bound
}

// add makes the series of key, bounded (names and owners that are new when their bound is
// reached go to OtherName), and records its labels.
func (l *labels) add(key seriesKey) *series {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.series[key]; s != nil { // another event made it meanwhile
		return s
	}
	key = l.bounded(key)
	if s := l.series[key]; s != nil {
		return s
	}
	if key.name != OtherName {
		l.names[key.name] = struct{}{}
	}
	if key.owner != "" && key.owner != OtherName {
		l.owners[key.owner] = struct{}{}
	}
	s := newSeries(l.m, key, l.ownerLabel)
	l.series[key] = s
	return s
}
