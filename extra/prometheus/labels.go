package dlockprom

import "sync"

// seriesKey is a name label and a kind.
type seriesKey struct{ name, kind string }

// labels maps the events' lock names and kinds to their series, within the bound on
// distinct name labels. Once a name label has series it keeps them; a name that came
// after the bound is full is never stored, so memory stays bounded too.
type labels struct {
	nameLabel func(string) string // nil: the name itself
	maxNames  int
	m         *metrics

	// mu guards series and names. Lookups of known keys, the common case, share it.
	mu     sync.RWMutex
	series map[seriesKey]*series
	names  map[string]struct{} // the name labels given so far, OtherName excepted
}

func newLabels(cfg config, m *metrics) *labels {
	return &labels{
		nameLabel: cfg.nameLabel,
		maxNames:  cfg.maxNames,
		m:         m,
		series:    make(map[seriesKey]*series),
		names:     make(map[string]struct{}),
	}
}

// get returns the series of a lock's name and kind, making it on the first event of a
// name label and kind.
func (l *labels) get(name, kind string) *series {
	if l.nameLabel != nil {
		name = l.nameLabel(name)
	}
	if name == "" {
		name = OtherName
	}
	key := seriesKey{name, kind}
	l.mu.RLock()
	s := l.series[key]
	if s == nil && l.overflows(key.name) {
		key.name = OtherName
		s = l.series[key]
	}
	l.mu.RUnlock()
	if s != nil {
		return s
	}
	return l.add(key)
}

// overflows reports whether name gets no label of its own: it has none, and the bound is
// reached. l.mu must be held.
func (l *labels) overflows(name string) bool {
	if name == OtherName {
		return false
	}
	_, known := l.names[name]
	return !known && len(l.names) >= l.maxNames
}

// add makes the series of key, or of OtherName and key's kind when key's name is new and
// the bound is reached.
func (l *labels) add(key seriesKey) *series {
	l.mu.Lock()
	defer l.mu.Unlock()
	if s := l.series[key]; s != nil { // another event made it meanwhile
		return s
	}
	if l.overflows(key.name) {
		key.name = OtherName
		if s := l.series[key]; s != nil {
			return s
		}
	} else if key.name != OtherName {
		l.names[key.name] = struct{}{}
	}
	s := newSeries(l.m, key.name, key.kind)
	l.series[key] = s
	return s
}
