// Package keyspace names the Redis keys and channels of a lock. Every key and channel of one
// lock shares the lock key's Redis Cluster hash slot, so that one script can touch them all.
package keyspace

import (
	"fmt"
	"strings"
)

// Keys are the Redis names of one lock.
type Keys struct {
	Lock    string // the lock itself; for a Mutex a plain string holding the holder's token
	Fence   string // the fencing counter; never expires
	Channel string // where releases are published
	Turns   string // Mutex: the processes waiting, oldest first
	Asks    string // Mutex: the standing requests of the waiting processes
	Tag     string // a prefix that hashes to the lock key's slot; see Aux
}

// Aux names a companion key or channel of the lock: it shares the lock key's slot.
func (k Keys) Aux(suffix string) string { return k.Tag + ":" + suffix }

// For derives the keys of the lock called name under prefix.
func For(prefix, name string) (Keys, error) {
	if name == "" {
		return Keys{}, fmt.Errorf("dlock: empty lock name: give every lock a name, such as %q", "orders:42")
	}
	lock := prefix + name
	tag, err := SlotTag(lock)
	if err != nil {
		return Keys{}, err
	}
	return Keys{Lock: lock, Fence: tag + ":fence", Channel: tag + ":released",
		Turns: tag + ":turns", Asks: tag + ":asks", Tag: tag}, nil
}

// SlotTag returns a prefix that hashes to the same Redis Cluster slot as key: the key itself
// if it has a hash tag, which every extension keeps, else the key wrapped in braces.
func SlotTag(key string) (string, error) {
	if key == "" {
		// "{}" would not be a hash tag: Redis hashes a key with an empty tag whole.
		return "", fmt.Errorf("dlock: empty lock key has no slot tag")
	}
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
