package dlockotel

import "sync"

// names bounds the lock names that metrics carry, and keeps the attribute sets of each
// (name, kind) pair it lets through, so that an event builds none.
//
// Each name goes through the mapper; the first max distinct results are kept and every
// later one becomes Other. So the memory it holds, like the time series the metrics
// make, is bounded by max+1 names times the kinds, whatever names the locks have.
type names struct {
	mapper func(string) string // nil: the name itself
	max    int

	mu    sync.RWMutex
	kept  map[string]bool        // guarded by mu: the names let through, at most max
	attrs map[lockKey]*lockAttrs // guarded by mu: for kept names and Other
}

type lockKey struct{ name, kind string }

func newNames(mapper func(string) string, max int) *names {
	return &names{mapper: mapper, max: max, kept: make(map[string]bool), attrs: make(map[lockKey]*lockAttrs)}
}

// of returns the attribute sets of the lock (name, kind).
func (n *names) of(name, kind string) *lockAttrs {
	if n.mapper != nil {
		name = n.mapper(name)
	}
	n.mu.RLock()
	label := name
	if !n.kept[name] && len(n.kept) >= n.max {
		label = Other
	}
	a := n.attrs[lockKey{label, kind}]
	n.mu.RUnlock()
	if a != nil {
		return a
	}
	return n.add(name, kind)
}

// add is of for a name or kind not seen yet.
func (n *names) add(name, kind string) *lockAttrs {
	n.mu.Lock()
	defer n.mu.Unlock()
	if !n.kept[name] {
		if len(n.kept) < n.max {
			n.kept[name] = true
		} else {
			name = Other
		}
	}
	k := lockKey{name, kind}
	a := n.attrs[k]
	if a == nil {
		a = newLockAttrs(name, kind)
		n.attrs[k] = a
	}
	return a
}
