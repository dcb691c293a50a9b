package engine

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// The sentinel errors; the public package exports these same values.
var (
	ErrNotAcquired = errors.New("dlock: not acquired: held by someone else")
	ErrNotHeld     = errors.New("dlock: lease not held")
	ErrLost        = errors.New("dlock: lease lost")
	ErrReleased    = errors.New("dlock: lease released")
	// ErrClosed is the batchers' own: a call that Close kept from being sent fails with
	// the same value as every other operation Close ends.
	ErrClosed = batch.ErrStopped
	// ErrNotTimestamp wraps the error of a TimestampMutex whose key holds something that
	// is not a deadline (timestamp.go).
	ErrNotTimestamp = errors.New("dlock: not a timestamp lock")
	// ErrNotReplicated: a write that fewer replicas acknowledged than WithReplicaAcks asks.
	ErrNotReplicated = errors.New("dlock: not replicated")
	// ErrNoLeader: an election that no term leads (election_read.go).
	ErrNoLeader = errors.New("dlock: no leader")
)

// prefix begins every error's text, once: an error wrapped inside another is written
// without it (Inner).
const prefix = "dlock: "

// inner is an error as it reads inside a message that already begins with prefix: its
// text without the prefix, the same error for errors.Is and errors.As.
type inner struct{ err error }

func (e inner) Error() string { return strings.TrimPrefix(e.err.Error(), prefix) }
func (e inner) Unwrap() error { return e.err }

// Inner returns err to be wrapped, with %w, by a message that begins with "dlock: ", so
// that the text says it once; nil stays nil.
func Inner(err error) error {
	if err == nil {
		return nil
	}
	return inner{err}
}

// A Diagnosis is a known cause of a server's error that retrying cannot help: a setting or
// the data, not load or topology. The CLI tells the same causes with Diagnose, and adds
// its exit codes.
type Diagnosis int

// The causes that have advice; Unknown has none.
const (
	Unknown           Diagnosis = iota
	BadCredentials              // the server refused the user or the password
	NoPermission                // the ACL user may not run a command dlock sends
	KeyInUse                    // a key of the lock holds another type of value (WRONGTYPE)
	CounterNotInteger           // the fencing counter holds something that is not an integer
	NotDeadline                 // a TimestampMutex's key holds something that is not a deadline
)

// Terms are one interface's words for what advice points to: the Go API's (APITerms) or
// the CLI's.
type Terms struct {
	Credentials string // where the user and the password are given
	Prefix      string // how another key namespace is chosen
	Permissions string // what the Redis user needs, or where to check it
}

// APITerms are the Go API's words, those of Explain.
var APITerms = Terms{
	Credentials: "the redis options or URL",
	Prefix:      "another prefix with WithPrefix",
	Permissions: "EVALSHA, EVAL, PUBLISH or SPUBLISH, SUBSCRIBE on the lock's keys and channels",
}

// diagnoses are told by what the error's text contains (a server's reply begins with its
// code, but a reply can reach the CLI wrapped, and Redis before 6 says "ERR invalid
// password"), the first that matches, with what to do in an interface's terms.
var diagnoses = []struct {
	d      Diagnosis
	signs  []string
	advice func(t Terms) string
}{
	{BadCredentials, []string{"WRONGPASS", "NOAUTH", "invalid password", "invalid username-password"}, func(t Terms) string {
		return "the server refused the credentials: check the user and password in " + t.Credentials
	}},
	{NoPermission, []string{"NOPERM"}, func(t Terms) string {
		return "the Redis user lacks a permission dlock needs: " + t.Permissions
	}},
	{KeyInUse, []string{"WRONGTYPE"}, func(t Terms) string {
		return "a key of the lock is used by something else: choose another name or " + t.Prefix
	}},
	{CounterNotInteger, []string{"ERR value is not an integer"}, func(Terms) string {
		return "the lock's fencing counter was overwritten with something else: delete it, or choose another name"
	}},
	{NotDeadline, []string{notStampPrefix}, func(t Terms) string {
		return "a TimestampMutex's key holds its holder's deadline, unix milliseconds as a decimal integer: if another program uses the key for something else, choose another name or " + t.Prefix
	}},
}

// Diagnose returns the known cause of the error whose text is msg, or Unknown.
func Diagnose(msg string) Diagnosis {
	for _, d := range diagnoses {
		for _, sign := range d.signs {
			if strings.Contains(msg, sign) {
				return d.d
			}
		}
	}
	return Unknown
}

// Advice is what to do about d, in the words t; "" for Unknown.
func (d Diagnosis) Advice(t Terms) string {
	for _, dg := range diagnoses {
		if dg.d == d {
			return dg.advice(t)
		}
	}
	return ""
}

// Explain adds what to do, in the Go API's words, to the errors that have advice.
func Explain(err error) string {
	msg := err.Error()
	if a := Diagnose(msg).Advice(APITerms); a != "" {
		return msg + " (" + a + ")"
	}
	return msg
}

// permanent reports whether retrying cannot help: the server answered, and the answer is
// about credentials, permissions or the data, not about load or topology; or dlock refused
// the call itself before sending it (a refusal).
func permanent(err error) bool {
	var r refusal
	return errors.As(err, &r) || Diagnose(err.Error()) != Unknown
}

// refusal is an error about the call itself, given before anything is sent: the same call
// is refused again, however long one waits.
type refusal struct{ error }

func (r refusal) Unwrap() error { return r.error }

// Failure is one node's failure in an operation, for the public package's NodeError.
type Failure struct {
	Addr string
	Err  error
	// silent is a node that did not answer within waited, whose cause probeSilent may tell.
	silent *Node
	waited time.Duration
}

// Shortfall is an operation that did not get the nodes it needed, for the public
// package's QuorumError.
type Shortfall struct {
	Op                    string
	Name                  string
	Agreed, Needed, Total int
	Nodes                 []Failure
}

// kindClash is an acquisition's WRONGTYPE, in the lock's terms rather than the script's
// sha and line: its key holds a value of another type, which a lock of another kind on
// the same name, or another program, wrote. Its text keeps the server's code, which
// Diagnose reads.
type kindClash struct {
	kind, name, key string
	err             error // the server's reply
}

func (e *kindClash) Error() string {
	return fmt.Sprintf("WRONGTYPE: a key of %s %q (%s, or one of its companions) holds another type of value: a lock of another kind on the same name (a Mutex and a Semaphore, say), or another program's data",
		kindTypes[e.kind], e.name, e.key)
}

func (e *kindClash) Unwrap() error { return e.err }

// kindTypes are the public types of the kinds.
var kindTypes = map[string]string{
	KindMutex: "Mutex", KindFair: "FairMutex", KindRead: "RWMutex", KindWrite: "RWMutex",
	KindSemaphore: "Semaphore", KindTimestamp: "TimestampMutex", KindMulti: "MultiMutex", KindElection: "Election",
}

// clashes rewrites the WRONGTYPE failures of an acquisition of t as kindClash.
func clashes(t *Target, fs []Failure) {
	for i, f := range fs {
		if Diagnose(f.Err.Error()) == KeyInUse {
			fs[i].Err = &kindClash{kind: t.scheme.kind(), name: t.name, key: t.keys.Lock, err: f.Err}
		}
	}
}
