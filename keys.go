package dlock

import (
	"fmt"
	"strings"
)

// keys are the Redis names of one lock. Every key and channel shares the lock key's Redis
// Cluster hash slot, so that one script can touch them all.
type keys struct {
	lock    string // the lock itself; for a Mutex a plain string holding the holder's token
	fence   string // the fencing counter; never expires
	channel string // where releases are published
}

// lockKeys derives the keys of the lock called name under prefix.
func lockKeys(prefix, name string) (keys, error) {
	if name == "" {
		return keys{}, fmt.Errorf("dlock: empty lock name: give every lock a name, such as %q", "orders:42")
	}
	lock := prefix + name
	tag, err := slotTag(lock)
	if err != nil {
		return keys{}, err
	}
	return keys{lock: lock, fence: tag + ":fence", channel: tag + ":released"}, nil
}

// slotTag returns a prefix that hashes to the same Redis Cluster slot as key: the key itself
// if it has a hash tag, which every extension keeps, else the key wrapped in braces.
func slotTag(key string) (string, error) {
	if open := strings.IndexByte(key, '{'); open >= 0 {
		if end := strings.IndexByte(key[open+1:], '}'); end > 0 {
			return key, nil
		}
	}
	if strings.ContainsRune(key, '}') {
		return "", fmt.Errorf("dlock: lock key %q has a '}' outside a hash tag, so its companion keys could not share its Redis Cluster slot: remove the brace or use a hash tag such as {orders}", key)
	}
	return "{" + key + "}", nil
}
