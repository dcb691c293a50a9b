package engine

import "context"

// A sharing is how the goroutines of one process share one lock key: each kind chooses
// one (scheme.sharing), with the state it needs, and the engine calls its hooks at fixed
// points of a Lock: around the wait (join, leave), before an attempt (fromProcess,
// changed, prepare), after the verdict (acquired) and on release (handOff). There are
// four:
//
//   - alone (this file): each goroutine asks Redis on its own. Readers, Semaphore,
//     MultiMutex.
//   - queued (queue.go): goroutines queue locally, first come first served, and only the
//     head asks Redis, so any number of local waiters cost one request per release.
//     RWMutex writers, TimestampMutex.
//   - hotKey (handoff.go, turns.go): queued, plus the hand-off of a hold to the next local
//     waiter without a round trip, and turns between processes. Mutex.
//   - claims (fair.go): every attempt asks with the waiter's id, which a release may
//     grant while the attempt is out. FairMutex.
type sharing interface {
	// join queues the caller locally and waits until it is the head; it returns the
	// error that ended the wait (ctx's, or ErrClosed). The caller calls leave afterwards,
	// whatever join returned.
	join(ctx context.Context, r *request) error
	leave(ctx context.Context, r *request)
	// heldHere returns this process's live hold of the key, or nil.
	heldHere() *Hold
	// fromProcess returns a hold given to the caller without an attempt of its own: handed
	// over by a local Unlock, or granted by a release in Redis (granted: the caller starts
	// it). The caller owns it.
	fromProcess(ctx context.Context, r *request) (h *Hold, granted bool)
	// changed returns a channel closed when this process's hold of the key ends or is
	// handed to the head of the local queue; nil (never ready) when this process holds
	// none, unless always is set.
	changed(r *request, always bool) <-chan struct{}
	// prepare fills in the ticket of r's next attempt: its token, and what else it tells
	// Redis of this process.
	prepare(r *request)
	// acquired returns the fencing token of a hold that an attempt acquired with the
	// fencing counter counter, and how many local hand-offs it may make.
	acquired(r *request, counter uint64) (fence, spare uint64)
	// handOff passes h, which Unlock is ending, to the next local waiter, and reports
	// whether it did.
	handOff(h *Hold) bool
	// rejoin forgets what this process asked with: Redis said it was served or left.
	rejoin()
	// refreshes reports whether the process keeps a request in Redis that its waiter must
	// refresh at least every waiterRefresh (a Mutex's standing request).
	refreshes() bool
	// queues reports whether local waiters wait for this process's holds of the key.
	queues() bool
}

// ticket is what one attempt asks with, made by the sharing's prepare: the holder token
// and, for a Mutex, the fencing tokens to reserve. It lives in the request and is made
// anew before each attempt.
type ticket struct {
	token any  // the holder token, boxed once for every call that carries it
	claim bool // a release may grant the token while the attempt is out: never undone
	// reserve is how many fencing tokens to reserve: 1 plus one per local waiter behind
	// the caller (behind), for the hand-offs the hold may make.
	reserve, behind int64
	stands          bool // the attempt asks with the process's standing request (turns.go)
}

// alone is the sharing of kinds whose goroutines each ask Redis on their own.
type alone struct{}

func (alone) join(context.Context, *request) error                 { return nil }
func (alone) leave(context.Context, *request)                      {}
func (alone) heldHere() *Hold                                      { return nil }
func (alone) fromProcess(context.Context, *request) (*Hold, bool)  { return nil, false }
func (alone) changed(*request, bool) <-chan struct{}               { return nil }
func (alone) acquired(_ *request, counter uint64) (uint64, uint64) { return counter, 0 }
func (alone) handOff(*Hold) bool                                   { return false }
func (alone) rejoin()                                              {}
func (alone) refreshes() bool                                      { return false }
func (alone) queues() bool                                         { return false }

func (alone) prepare(r *request) {
	r.tk = ticket{token: r.t.scheme.newToken(r.t), reserve: 1}
}
