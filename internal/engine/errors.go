package engine

import (
	"errors"
	"strings"
)

// The sentinel errors; the public package exports these same values.
var (
	ErrNotAcquired = errors.New("dlock: not acquired: held by someone else")
	ErrNotHeld     = errors.New("dlock: lease not held")
	ErrLost        = errors.New("dlock: lease lost")
	ErrReleased    = errors.New("dlock: lease released")
	ErrClosed      = errors.New("dlock: client closed")
	// ErrNotTimestamp wraps the error of a TimestampMutex whose key holds something that
	// is not a deadline (timestamp.go).
	ErrNotTimestamp = errors.New("dlock: not a timestamp lock")
	// ErrNotReplicated: a write that fewer replicas acknowledged than WithReplicaAcks asks.
	ErrNotReplicated = errors.New("dlock: not replicated")
)

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
	{prefix(notStampPrefix), "a TimestampMutex's key holds its holder's deadline, unix milliseconds as a decimal integer: if another program uses the key for something else, choose another name or prefix"},
}

func prefix(p string) func(string) bool {
	return func(msg string) bool { return strings.HasPrefix(msg, p) }
}

func refusedCredentials(msg string) bool {
	return strings.HasPrefix(msg, "WRONGPASS") || strings.HasPrefix(msg, "NOAUTH") ||
		strings.Contains(msg, "invalid password") || strings.Contains(msg, "invalid username-password")
}

// Explain adds what to do to the errors that have advice.
func Explain(err error) string {
	msg := err.Error()
	if a := adviceFor(msg); a != "" {
		return msg + " (" + a + ")"
	}
	return msg
}

// permanent reports whether retrying cannot help: the server answered, and the answer is
// about credentials, permissions or the data, not about load or topology.
func permanent(err error) bool { return adviceFor(err.Error()) != "" }

func adviceFor(msg string) string {
	for _, a := range advice {
		if a.match(msg) {
			return a.hint
		}
	}
	return ""
}

// Failure is one node's failure in an operation, for the public package's NodeError.
type Failure struct {
	Addr string
	Err  error
}

// Shortfall is an operation that did not get the nodes it needed, for the public
// package's QuorumError.
type Shortfall struct {
	Op                    string
	Name                  string
	Agreed, Needed, Total int
	Nodes                 []Failure
}
