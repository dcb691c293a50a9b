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

// nodeError is what one node said, named by its address.
type nodeError struct {
	node string
	err  error
}

func (e *nodeError) Error() string { return e.node + ": " + explain(e.err) }
func (e *nodeError) Unwrap() error { return e.err }

// quorumError lists what every failing node said.
type quorumError struct {
	op     string // "lock", "unlock", "extend"
	name   string
	got    int // nodes that agreed
	need   int
	total  int
	errs   []error // one nodeError per failing node
	single bool    // one deployment: say it plainly
}

func (e *quorumError) Error() string {
	var b strings.Builder
	if e.single && len(e.errs) == 1 {
		fmt.Fprintf(&b, "dlock: %s %q: %v", e.op, e.name, e.errs[0])
		return b.String()
	}
	fmt.Fprintf(&b, "dlock: %s %q: %d of %d nodes agreed, %d needed", e.op, e.name, e.got, e.total, e.need)
	for _, err := range e.errs {
		b.WriteString("; ")
		b.WriteString(err.Error())
	}
	return b.String()
}

func (e *quorumError) Unwrap() []error { return e.errs }

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
