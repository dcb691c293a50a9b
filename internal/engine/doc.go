// Package engine is how dlock's locks work; package dlock, at the root, is the API over
// it and says what is guaranteed. ARCHITECTURE.md at the root of the repository maps the
// data flow to the files of this package and lists the invariants and where each is kept.
//
// A Lock call flows one way:
//
//	request (request.go) -> wait (wait.go) -> attempt (attempt.go) -> fan-out and verdict
//	(votes.go) -> hold (hold.go, lease.go) -> renewal (renewal.go) -> release (hold.go)
//
// Each file owns one type, and that type's methods are in it, with the small types only it
// uses: Target (target.go), request, waiting (wait.go), votes, Hold, Lease, renewals,
// coordinator, localQueue, Client, Node.
//
// Each kind of lock is a scheme (its scripts, mutex.go, fair.go, rw.go, semaphore.go,
// multi.go) and a policy (scheme.go): how its waiters are known in Redis and how the
// goroutines of one process share its key. The Mutex's hot-key machinery (local queue,
// hand-off, turns, grants, standing requests) is one coordinator (coordinator.go), with
// hooks around the wait, before an attempt, after the verdict and on release; the other
// kinds have none. A MultiMutex over several Redis Cluster hash slots is one Target per
// slot, its parts, and the steps that send one call per node send one per part and node
// for it (parts.go).
//
// What the observers are told is built and sent in observer.go, which each step calls in
// one line; without observers, each call returns at once.
//
// Why the mechanisms are what they are:
//
// Waiting does not poll. A release publishes on the lock's channel (internal/notify keeps
// one subscription per node for the whole Client); a refused attempt learns the holder's
// remaining time and sleeps no longer; CLIENT TRACKING reports writes to a Mutex's key by
// other programs, which publish nothing (tracking.go), and where the server refuses it a
// re-check with a bounded back-off stands in; keyspace events, where the server sends
// them, wake waiters too. Waiters that hold a place in a Redis queue
// (FairMutex, Semaphore, an RWMutex writer) refresh it every waiterRefresh: that
// keep-alive, not polling, is what lets a dead waiter be skipped within waiterTTL.
//
// Every write to a lease only lengthens the key: renewals and Extends of one hold may be
// in flight at once and reach Redis in any order, even after their caller gave up on them
// (see the comment on Hold's fields). An Extend that shortens does so on the client only.
//
// A lease's deadline comes from the local monotonic clock read before the first request
// of what proved it (quorum.Deadline), never from Redis's clock, which the scripts use
// only for what they decide inside Redis.
package engine
