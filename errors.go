package dlock

import (
	"fmt"
	"strings"

	"github.com/seed51c676c8/dlock/internal/engine"
)

// Sentinel errors. Errors returned by dlock wrap them; check with errors.Is.
var (
	// ErrNotAcquired is returned by TryLock and TryAcquire when someone else holds the lock.
	ErrNotAcquired = engine.ErrNotAcquired
	// ErrNotHeld is returned by Unlock and Extend on a lease that has already ended.
	ErrNotHeld = engine.ErrNotHeld
	// ErrLost is what Lease.Err reports when the lease ended without Unlock: it expired,
	// its key was deleted or taken, or renewal failed until the deadline.
	ErrLost = engine.ErrLost
	// ErrReleased is what Lease.Err reports after Unlock.
	ErrReleased = engine.ErrReleased
	// ErrClosed is returned by every operation of a closed Client.
	ErrClosed = engine.ErrClosed
	// ErrNotTimestamp is wrapped by the error of a TimestampMutex whose key holds
	// something that is not a unix-ms deadline (text, a number in seconds); the error
	// quotes what it holds.
	ErrNotTimestamp = engine.ErrNotTimestamp
	// ErrNotReplicated is wrapped by the error of an acquisition, Extend or Unlock whose
	// write fewer replicas acknowledged in time than WithReplicaAcks asks; the error says
	// how many did.
	ErrNotReplicated = engine.ErrNotReplicated
	// ErrNoLeader is wrapped by Election.Leader's error, and a Leader's Err from Observe,
	// when no term leads the election.
	ErrNoLeader = engine.ErrNoLeader
)

// NodeError is one node's failure: an error reply, a connection that failed, or no answer
// in time. Find it with errors.As in the error of any operation.
type NodeError struct {
	Addr string // the node's address; for a Cluster, its seed addresses
	Err  error  // what the node answered, or why it did not (wraps ctx's error if ctx ended the wait)
}

func (e *NodeError) Error() string { return e.Addr + ": " + engine.Explain(engine.Inner(e.Err)) }
func (e *NodeError) Unwrap() error { return e.Err }

// QuorumError is an operation that did not get the nodes it needed: one deployment that
// failed (Total 1), or too few nodes of a quorum that agreed. Find it with errors.As; it
// unwraps to each failing node's *NodeError.
type QuorumError struct {
	Op     string       // "lock", "unlock", "extend", "inspect" or "force-unlock"
	Name   string       // the lock's name
	Agreed int          // nodes that agreed (granted, released, extended)
	Needed int          // nodes that had to agree
	Total  int          // nodes asked
	Nodes  []*NodeError // each node that failed or did not answer
}

func (e *QuorumError) Error() string {
	var b strings.Builder
	if e.Total == 1 && len(e.Nodes) == 1 {
		fmt.Fprintf(&b, "dlock: %s %q: %v", e.Op, e.Name, e.Nodes[0])
		return b.String()
	}
	fmt.Fprintf(&b, "dlock: %s %q: %d of %d nodes agreed, %d needed", e.Op, e.Name, e.Agreed, e.Total, e.Needed)
	for _, err := range e.Nodes {
		b.WriteString("; ")
		b.WriteString(err.Error())
	}
	return b.String()
}

// Unwrap returns the node errors, so that errors.Is and errors.As see through to them.
func (e *QuorumError) Unwrap() []error {
	errs := make([]error, len(e.Nodes))
	for i, n := range e.Nodes {
		errs[i] = n
	}
	return errs
}

// quorumError is the engine's Shortfall as the public error.
func quorumError(s engine.Shortfall) error {
	e := &QuorumError{Op: s.Op, Name: s.Name, Agreed: s.Agreed, Needed: s.Needed, Total: s.Total}
	for _, f := range s.Nodes {
		e.Nodes = append(e.Nodes, &NodeError{Addr: f.Addr, Err: f.Err})
	}
	return e
}
