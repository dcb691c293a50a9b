// Package keyspace names the Redis keys and channels of a lock. Every key and channel of one
// lock shares the lock key's Redis Cluster hash slot, so that one script can touch them all.
package keyspace

import (
	"fmt"
	"strings"
)

// Keys are the Redis names of one lock.
type Keys struct {
	// Lock is the lock itself: for a Mutex a plain string holding the holder's token; for
	// a TimestampMutex one holding the holder's deadline, decimal unix milliseconds.
	Lock    string
	Fence   string // the fencing counter; never expires
	Channel string // where releases are published
	Turns   string // Mutex: the processes waiting, oldest first
	Asks    string // Mutex: the standing requests of the waiting processes
	// Gone is the prefix of the lock's tombstones: a token the lock was given to (for a
	// TimestampMutex, the id of the attempt that took it) is remembered, until its lease's
	// end and 10 s more, by the key Gone+token, so that a late copy of its acquisition
	// takes nothing (gone.lua).
	Gone string
	Tag  string // a prefix that hashes to the lock key's slot: every companion extends it
}

// The suffixes of the companion keys and channels, after Tag. A kind that adds a companion
// adds its suffix here and to Companions, so that the CLI's list tells it from a lock key.
const (
	fenceSuffix     = ":fence"
	channelSuffix   = ":released"
	turnsSuffix     = ":turns"
	asksSuffix      = ":asks"
	queueSuffix     = ":queue"
	deadlinesSuffix = ":queue:deadlines"
	readersSuffix   = ":readers"
	writersSuffix   = ":writers"
	permitsSuffix   = ":permits"
	leaderSuffix    = ":leader"
	// GrantedInfix separates Tag from a Client id (or a FairMutex waiter's token) in the
	// name of the channel its FairMutex waiters hear their grants on (GrantedPrefix).
	GrantedInfix = ":granted:"
	// GoneInfix separates Tag from a served token in the name of its tombstone key (Gone).
	GoneInfix = ":gone:"
)

// Companions are the suffixes of every companion key, after a lock's Tag; the tombstones
// (GoneInfix and a token) and the waiters' channels (GrantedInfix, not keys) end in a
// token, and are not listed.
func Companions() []string {
	return []string{fenceSuffix, turnsSuffix, asksSuffix, queueSuffix, deadlinesSuffix, readersSuffix, writersSuffix, permitsSuffix, ownerSuffix, leaderSuffix}
}

// Queue is the FairMutex's or the Semaphore's queue: a list of waiter ids in arrival order.
func (k Keys) Queue() string { return k.Tag + queueSuffix }

// QueueDeadlines is the sorted set of queue entries, waiter id -> the Redis time (ms) the
// entry dies unless refreshed.
func (k Keys) QueueDeadlines() string { return k.Tag + deadlinesSuffix }

// Readers is the RWMutex's readers: a sorted set, token -> lease end (Redis time, ms).
func (k Keys) Readers() string { return k.Tag + readersSuffix }

// Writers is the RWMutex's waiting writers: a sorted set, writer id -> entry deadline.
func (k Keys) Writers() string { return k.Tag + writersSuffix }

// Permits is the Semaphore's hash, token -> permits held; its holders are the lock key.
func (k Keys) Permits() string { return k.Tag + permitsSuffix }

// Leader is an Election's record, a hash of the term that wrote last (its token, fencing
// token, value, owner, since), and the channel where each write is published; its lock is
// Lock, a Mutex's key.
func (k Keys) Leader() string { return k.Tag + leaderSuffix }

// GrantedPrefix begins the channel a FairMutex waiter hears its grant on: its Client's id
// follows, or its own token when it has none (scripts' grant_channel.lua).
func (k Keys) GrantedPrefix() string { return k.Tag + GrantedInfix }

// Data is a key of the caller's own in the lock's hash slot, for the writes a lease guards
// (Lease.Key): the lock's hash tag in braces, DataInfix and name. No key of dlock's has
// DataInfix after a brace, so name cannot clash with a lock's own keys.
func (k Keys) Data(name string) string { return "{" + HashTag(k.Tag) + "}" + DataInfix + name }

// DataInfix separates the hash tag from the caller's name in a Data key.
const DataInfix = "/"

// ReadersOf is the readers key of the lock whose slot tag is tag: an RWMutex held by
// readers alone has no lock key, and the CLI's list finds it by this key.
func ReadersOf(tag string) string { return tag + readersSuffix }

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
	return Keys{Lock: lock, Fence: tag + fenceSuffix, Channel: tag + channelSuffix,
		Turns: tag + turnsSuffix, Asks: tag + asksSuffix, Gone: tag + GoneInfix, Tag: tag}, nil
}

// SlotTag returns a prefix that hashes to the same Redis Cluster slot as key: the key itself
// if it has a hash tag, which every extension keeps, else the key wrapped in braces.
func SlotTag(key string) (string, error) {
	if key == "" {
		// "{}" would not be a hash tag: Redis hashes a key with an empty tag whole.
		return "", fmt.Errorf("dlock: empty lock key has no slot tag")
	}
	if HashTag(key) != key { // it has a tag: a tag is never the whole key
		return key, nil
	}
	if strings.ContainsRune(key, '}') {
		return "", fmt.Errorf("dlock: lock key %q has a '}' outside a hash tag, so its companion keys could not share its Redis Cluster slot: remove the brace or use a hash tag such as {orders}", key)
	}
	return "{" + key + "}", nil
}
