package dlock

import (
	"time"

	"github.com/seed51c676c8/dlock/internal/engine"
)

// The kinds of lock that LockInfo.Kind names. A lock that is not there has the kind "".
const (
	KindMutex     = engine.KindMutex     // Mutex: a string key holding the holder's token
	KindFair      = engine.KindFair      // FairMutex: a Mutex's key and a queue of waiters
	KindRWMutex   = "rwmutex"            // RWMutex: a write lock key, a set of readers, a set of waiting writers
	KindSemaphore = engine.KindSemaphore // Semaphore: a set of holders, their permits, a queue of waiters
)

// LockInfo is what Inspect found of one lock: what ForceUnlock would remove and who
// waits. Times left are Redis's own (PTTL and lease ends against the server's TIME), not
// the client's clock, so they hold however far this process's clock is off.
//
// On one deployment the fields are those of its only node. On a quorum they summarise
// Nodes: a holder is listed when it holds on a majority of the nodes (with the least time
// it has left on any of them), Kind is the kind any node found (the first that found one),
// Fence the largest counter, Waiters every waiter of any node, each once.
type LockInfo struct {
	Name string // the lock's name, as given to Inspect
	Key  string // its Redis key, with the Client's prefix

	Kind    string   // KindMutex, KindFair, KindRWMutex, KindSemaphore, or "" when nothing is there
	Holders []Holder // who holds it: none when it is free
	Fence   uint64   // the fencing counter: the latest token handed out (0: never held)
	Waiters []string // the ids of those waiting for it, in their order (see NodeInfo.Waiters)

	Nodes []NodeInfo // each node, in the order the Client was given them
}

// Held reports whether someone holds the lock.
func (in *LockInfo) Held() bool { return len(in.Holders) > 0 }

// Holder is one holder of a lock.
type Holder struct {
	// Token is the holder's token as stored in Redis: for dlock's holders 48 hex digits,
	// the id of the Client that names its owner (16), then 128 random bits (32); 32
	// digits alone from a Client with WithOwner("").
	// For a moment after a Mutex release it may be "turn:" and the id of the process whose
	// turn it is. A TimestampMutex, which Inspect reports as a mutex, stores its holder's
	// deadline in unix milliseconds instead. This is the ownership token, not the fencing
	// token.
	Token string
	// Owner is the name of the Client that holds it (WithOwner; by default "host:pid"),
	// or "" when it is not known: a holder written by another library, a Client with
	// WithOwner(""), a TimestampMutex (whose key holds a deadline), or a Client whose owner
	// key has expired after it stopped renewing.
	Owner string
	// Reader is set for a reader of an RWMutex; its writer has Reader unset.
	Reader bool
	// Permits is how many permits a Semaphore holder holds; 1 for the other kinds.
	Permits int64
	// TTL is the time the holder's lease has left; -1 when its key has no expiry (written
	// by something other than dlock).
	TTL time.Duration
}

// NodeInfo is what one node holds of a lock.
type NodeInfo struct {
	Addr string // the node's address; for a Cluster, its seed addresses

	Kind    string   // as LockInfo.Kind, on this node
	Holders []Holder // the live holders on this node
	Fence   uint64   // this node's fencing counter
	// Waiters are the waiters with a live entry in Redis, in their order: a FairMutex's or
	// a Semaphore's queue (waiter ids), an RWMutex's waiting writers, a Mutex's turn list
	// (process ids: goroutines of one process queue locally behind one entry). Waiters of a
	// Mutex on a quorum, or of a Semaphore on a quorum, keep no entry: see Listeners.
	Waiters []string
	// Listeners is the number of connections subscribed to the lock's release channel.
	// dlock shares one subscription per Client and node, so it counts waiting processes,
	// not goroutines; FairMutex waiters listen on channels of their own and are not counted.
	Listeners int64

	// Err is why this node could not be read (or, from ForceUnlock, changed); its
	// other fields are then empty.
	Err error
}
