package dlock

import (
	"context"
	"time"

	"github.com/seed51c676c8/dlock/internal/engine"
)

// Election elects one leader per name at a time, each term fenced: a candidate that wins
// holds a Term, a lease of the election's lock whose Token grows from term to term, and a
// value that every other process can read (Leader) and follow (Observe), such as the
// leader's address. Like a Mutex it is a handle, safe for concurrent use, and works on
// every deployment a Mutex does; waiting candidates wake when a leader resigns or its term
// expires.
//
// Its lock is the Mutex key of the same name (an Election and a Mutex of one name exclude
// each other; Inspect and ForceUnlock work on it), and its value lives beside it, in the
// same hash slot, for as long as the term. A term leads only while the lock holds its
// token, so a write of a term that ended, however late it lands, changes nothing.
type Election struct {
	e *engine.Election
}

// MaxValueLen is the longest value a leader may proclaim, in bytes (64 KiB); a longer
// one is an error. Every observer reads the value at every change: proclaim a reference
// (an address, a key) rather than data.
const MaxValueLen = engine.MaxValueLen

// Election returns the election called name. Its LockOptions are those of the term's
// lease (TTL, NoRenew). An empty name or invalid option is reported by every method.
func (c *Client) Election(name string, opts ...LockOption) *Election {
	cfg, err := newLockConfig(opts)
	return &Election{e: engine.NewElection(c.e, name, cfg, err)}
}

// Campaign waits until the caller leads, or ctx ends, and returns its term, whose value is
// value. ctx bounds the wait and every request, as for Mutex.Lock; when it ends first the
// error wraps ctx.Err() and the caller does not lead. Candidates are not served in order.
func (e *Election) Campaign(ctx context.Context, value string) (*Term, error) {
	return term(e.e.Campaign(ctx, value, false))
}

// TryCampaign makes one attempt to lead, and returns an error wrapping ErrNotAcquired if
// another term leads.
func (e *Election) TryCampaign(ctx context.Context, value string) (*Term, error) {
	return term(e.e.Campaign(ctx, value, true))
}

// Leader reads the election on every node: the leading term's value, token, owner and
// since when. When no term leads the error wraps ErrNoLeader; when too few nodes answer
// to tell, it is a *QuorumError. ctx bounds the call.
func (e *Election) Leader(ctx context.Context) (*Leader, error) {
	r, err := e.e.Leader(ctx)
	if err != nil {
		return nil, err
	}
	l := leader(r)
	return &l, nil
}

// Observe returns a channel of the election's leaders: the current one at once, then each
// change, within about a round trip of a new term's first write, a Proclaim or a
// resignation, and within the time the term had left plus a round trip after a term that
// expired. A Leader whose Err wraps ErrNoLeader says that no term leads. A reader that
// is slower than the changes may miss some, never the latest: a value not taken yet is
// replaced by a newer one. When the nodes cannot be read, Observe sends a Leader whose
// Err says why, logs it, and reads again with backoff. The channel is closed when ctx
// ends or the Client is closed, and after the error of an invalid name or option.
func (e *Election) Observe(ctx context.Context) <-chan Leader {
	return engine.Observe(ctx, e.e, leader)
}

// Run campaigns for value and runs fn while leading, with a ctx that is cancelled when the
// term ends or ctx ends. When fn returns while the term still leads, Run resigns and
// returns fn's error (nil included) without campaigning again. When the term ends first,
// fn should return soon; Run logs the loss and campaigns again, with backoff, as it does
// after a campaign that failed on the nodes, until ctx ends (the error then wraps ctx's).
// A campaign's error that retrying cannot help (an invalid value or option, a closed
// Client, a key that holds another type of value, a refused permission, a Lock that
// would wait for a lease its ctx carries) is returned at once.
func (e *Election) Run(ctx context.Context, value string, fn func(ctx context.Context) error) error {
	return e.e.Run(ctx, value, fn)
}

// Term is one term of leadership: a Lease (its Token is greater than every earlier term's;
// its Context is cancelled and Done closed when the term ends; Err says ErrLost after a
// loss) and the leader's value. Unlock resigns: observers see no leader, or the next.
type Term struct {
	*Lease
	t *engine.Term
}

func term(t *engine.Term, err error) (*Term, error) {
	if err != nil {
		return nil, err
	}
	return &Term{Lease: (*Lease)(t.Lease), t: t}, nil
}

// Proclaim makes value the leader's value while this term leads, and tells the observers.
// After the term has ended, or when Redis finds it has, it returns an error wrapping
// ErrNotHeld and ErrLost (or ErrReleased; ErrNotHeld alone while an Unlock of the term is
// under way), and writes nothing. Otherwise, on failure, the value may or may not have
// been written; a Proclaim made later wins over an earlier one that lands after it. ctx
// bounds the request.
func (t *Term) Proclaim(ctx context.Context, value string) error { return t.t.Proclaim(ctx, value) }

// Value returns the value of the newest Campaign or Proclaim of this term that succeeded.
func (t *Term) Value() string { return t.t.Value() }

// Leader is a leading term, as Leader and Observe read it.
type Leader struct {
	Value string    // the value of the term's newest write
	Token uint64    // the term's fencing token (Term.Token)
	Owner string    // the leader's Client's WithOwner
	Since time.Time // when the term began, on the clock of the Redis server
	// Err is set only by Observe: an error wrapping ErrNoLeader when no term leads, or
	// why the nodes could not be read. The other fields are then zero.
	Err error
}

func leader(r engine.Reading) Leader {
	return Leader{Value: r.Value, Token: r.Token, Owner: r.Owner, Since: r.Since, Err: r.Err}
}
