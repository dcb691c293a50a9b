package keyspace

import "strings"

// CompanionOf reports whether key is a companion of some lock key, and splits it into the
// lock's slot tag and the suffix (GoneInfix for a tombstone, GrantedInfix for a waiter's
// channel name). Companions are named SlotTag(lock)+suffix, and SlotTag always has a hash
// tag.
func CompanionOf(key string) (tag, suffix string, ok bool) {
	for _, suffix := range Companions() {
		if base, ok := strings.CutSuffix(key, suffix); ok && isTag(base) {
			return base, suffix, true
		}
	}
	if base, ok := tagBefore(key, GoneInfix); ok && isToken(key[len(base)+len(GoneInfix):]) {
		return base, GoneInfix, true
	}
	if base, ok := tagBefore(key, GrantedInfix); ok {
		return base, GrantedInfix, true
	}
	return "", "", false
}

// tagBefore returns the part of key before an occurrence of infix that is its own slot
// tag, if there is one.
func tagBefore(key, infix string) (string, bool) {
	for i := 0; ; {
		j := strings.Index(key[i:], infix)
		if j < 0 {
			return "", false
		}
		if base := key[:i+j]; isTag(base) {
			return base, true
		}
		i += j + 1
	}
}

// isTag reports whether base is its own slot tag, as every Keys.Tag is.
func isTag(base string) bool {
	t, err := SlotTag(base)
	return err == nil && t == base
}

// LockOfTag returns the lock key under prefix whose slot tag is tag: tag without its
// braces ("{dlock:x}" for "dlock:x"), or tag itself when the name has a hash tag.
func LockOfTag(tag, prefix string) (string, bool) {
	if inner, ok := strings.CutPrefix(tag, "{"); ok {
		if inner, ok = strings.CutSuffix(inner, "}"); ok && strings.HasPrefix(inner, prefix) {
			if t, err := SlotTag(inner); err == nil && t == tag {
				return inner, true
			}
		}
	}
	if strings.HasPrefix(tag, prefix) && isTag(tag) {
		return tag, true
	}
	return "", false
}
