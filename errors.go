package dlock

import (
	"errors"
	"fmt"
	"strings"
)

// Sentinel errors. Errors returned by dlock wrap them; check with errors.Is.
var (
	// ErrNotAcquired is returned by TryLock and TryAcquire when someone else holds the lock.
	ErrNotAcquired = errors.New("dlock: not acquired: held by someone else")
	// ErrNotHeld is returned by Unlock and Extend on a lease that has already ended.
	ErrNotHeld = errors.New("dlock: lease not held")
	// ErrLost is what Lease.Err reports when the lease ended without Unlock: it expired,
	// its key was deleted or taken, or renewal failed until the deadline.
	ErrLost = errors.New("dlock: lease lost")
	// ErrReleased is what Lease.Err reports after Unlock.
	ErrReleased = errors.New("dlock: lease released")
	// ErrClosed is returned by every operation of a closed Client.
	ErrClosed = errors.New("dlock: client closed")
)

// NodeError is one node's failure: an error reply, a connection that failed, or no answer
// in time. Find it with errors.As in the error of any operation.
type NodeError struct {
	Addr string // the node's address; for a Cluster, its seed addresses
	Err  error  // what the node answered, or why it did not (wraps ctx's error if ctx ended the wait)
}

func (e *NodeError) Error() string { return e.Addr + ": " + explain(e.Err) }
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

// advice is what to do about the errors whose cause is a setting or the data rather than
// a passing failure: retrying cannot help them.
var advice = []struct {
	match func(msg string) bool
	hint  string
}{
	{refusedCredentials, "the server refused the credentials: check the user and password in the redis options or URL"},
	{prefix("WRONGTYPE"), "the lock's key is used by something else: choose another name, or another prefix with WithPrefix"},
	{prefix("NOPERM"), "the Redis user lacks a permission dlock needs: EVALSHA, EVAL, PUBLISH or SPUBLISH, SUBSCRIBE on the lock's keys and channels"},
	{prefix("ERR value is not an integer"), "the lock's fencing counter was overwritten with something else: delete it, or choose another name"},
}

func prefix(p string) func(string) bool {
	return func(msg string) bool { return strings.HasPrefix(msg, p) }
}

func refusedCredentials(msg string) bool {
	return strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH") ||
		strings.Contains(msg, "invalid password") || strings.Contains(msg, "invalid username-password")
}

// explain adds what to do to the errors that have advice.
func explain(err error) string {
	msg := err.Error()
	for _, a := range advice {
		if a.match(msg) {
			return msg + " (" + a.hint + ")"
		}
	}
	return msg
}

// permanent reports whether retrying cannot help: the server answered, and the answer is
// about credentials, permissions or the data, not about load or topology.
func permanent(err error) bool {
	msg := err.Error()
	for _, a := range advice {
		if a.match(msg) {
			return true
		}
	}
	return false
}
