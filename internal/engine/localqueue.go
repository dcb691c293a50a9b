package engine

import "context"

// localQueue orders the goroutines of this process that wait for one lock key, first come
// first served. Only the head asks Redis; the others wait for their turn, so that any
// number of local waiters cost one request per release, not one each. Every field is
// guarded by Client.mu.
type localQueue struct {
	waiters []*localWaiter // by arrival; waiters[0] is the head
	held    *Hold          // this process's live outer hold of the key, nil when none
	// changed is closed (and cleared) when held is cleared or handed to the head; it is
	// made when the head first waits on it, so an uncontended Lock makes none.
	changed chan struct{}
	ask     *mutexAsk // Mutex: this process's standing request, nil when none (coordinator.go)
}

// behind is how many waiters are queued behind w (all of them if w is not queued).
func (q *localQueue) behind(w *localWaiter) int {
	if w != nil && len(q.waiters) > 0 && q.waiters[0] == w {
		return len(q.waiters) - 1
	}
	return len(q.waiters)
}

// signalLocked returns q.changed, making it if need be.
func (q *localQueue) signalLocked() <-chan struct{} {
	if q.changed == nil {
		q.changed = make(chan struct{})
	}
	return q.changed
}

// notifyLocked wakes whoever waits on q.changed.
func (q *localQueue) notifyLocked() {
	if q.changed != nil {
		close(q.changed)
		q.changed = nil
	}
}

// localWaiter is one Lock call in a local queue; it lives in the call's request.
type localWaiter struct {
	ctx    context.Context // the waiter's Lock ctx: a hold handed to it keeps its values
	cfg    LockConfig      // the options of the handle it locked: a hold handed to it has them
	turn   chan struct{}   // closed when the waiter becomes the head
	queue  *localQueue     // the queue it joined
	handed *Hold           // guarded by Client.mu: the hold handed to it, until taken
}

// closedChan is the turn of a waiter that is the head as soon as it joins.
var closedChan = func() chan struct{} { ch := make(chan struct{}); close(ch); return ch }()
