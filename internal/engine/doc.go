// Package engine is how dlock's locks work; package dlock, at the root, is the API over
// it and says what is guaranteed. ARCHITECTURE.md at the root of the repository maps the
// data flow to the files of this package and lists the invariants and where each is kept.
//
// A Lock call flows through these files, and their calls go one way, with no cycle (a
// test, internal/structure, checks it):
//
//	target.go, request.go        a handle, and one call of Lock
//	sharing.go (queue.go,         how the goroutines of one process share a key: a local
//	  hotkey.go, fair.go)         queue, hand-off, turns, claims
//	wait.go, listen.go,           the wait: wake-ups, CLIENT TRACKING, the back-off
//	  tracking.go
//	attempt.go, fence.go          one attempt, its verdict, the fencing token settled
//	hold.go, lease.go             the hold of an acquisition, and its leases
//	renewal.go,                   every due hold of the Client renewed in one write per node;
//	  renewal_replies.go          its replies, waited for the verdicts, then for the rest
//	poll.go, fanout.go, votes.go  one call per part and node, the answers counted
//	local.go, node.go             what this process holds and waits for; one deployment
//
// Each kind of lock is a scheme (scheme.go) in files of its own: its scripts, keys and
// arguments, how its waiters wait (policy), and its sharing, made by the constructor that
// registers the kind (NewMutex in mutex.go, NewFairMutex in fair.go, NewRWMutex in rw.go,
// NewSemaphore in semaphore.go, NewTimestampMutex in timestamp.go, NewMultiMutex in
// multi.go). The engine asks the scheme and the sharing through their interfaces; it
// knows no kind by name, so a kind is added in its own files.
//
// A lock is one or more parts (Target.parts): a MultiMutex over several Redis Cluster
// hash slots is one Target per slot (multi_parts.go), every other lock its own one part.
// Release, Extend, the undoing of an attempt, the renewal and the wait send one call per
// part and node; each part counts its own majority, and the lock holds while every part
// does (votes.reply), as acquisition judges each part. Only acquisition takes the parts
// one after the other, in order, so that two MultiMutexes meet first on the same part.
//
// A hold never calls back into what holds it: its Target registers what its start and
// its end mean (holdHooks: the Client's record and the local queue in local.go; a
// MultiMutex gives back the names of a hold lost on one). Observers are told from
// observer.go, which each step calls in one line and which returns at once without
// observers: then no report is built and a Lock allocates nothing for them. The events
// of one hold are sent under its holdObs's mutex, in the order they happened, none before
// the WaitEnded that delivers the hold.
//
// Why the mechanisms are what they are:
//
// Waiting does not poll. A release publishes on the lock's channel (internal/notify keeps
// one subscription per node for the whole Client); a refused attempt learns the holder's
// remaining time and sleeps no longer; CLIENT TRACKING reports writes to a Mutex's key by
// other programs, which publish nothing (tracking.go), and where the server refuses it a
// re-check with a bounded back-off stands in; keyspace events, where the server sends
// them, wake waiters too. Waiters that hold a place in a Redis queue (FairMutex,
// Semaphore, an RWMutex writer) refresh it every waiterRefresh: that keep-alive, not
// polling, is what lets a dead waiter be skipped within waiterTTL.
//
// Every write to a lease only lengthens the key: renewals and Extends of one hold may be
// in flight at once and reach Redis in any order, even after their caller gave up on them
// (see the comment on Hold's fields). An Extend that shortens does so on the client only.
// A token is served once (internal/scripts/gone.lua): a late request of a lease that ended
// never finds its token again.
//
// A lease's deadline comes from the local monotonic clock read before the first request
// of what proved it (quorum.Deadline), never from Redis's clock, which the scripts use
// only for what they decide inside Redis.
//
// A quorum costs the client one call per node each way. A Lock and an Unlock on N nodes
// are sent by one quorum.Fanout from the caller's goroutine, and the replies are counted
// until the outcome is settled: Lock returns once a majority granted (votes.settled),
// Unlock once a majority released or showed the key gone (votes.releaseSettled), without
// waiting for the slower nodes, whose release is queued on their lane behind their
// acquisition. There is no SCRIPT LOAD (a script's first call is an EVAL), no TIME, and
// no fence raise while the nodes' counters are in step (settleFence and hearLate raise
// only the nodes behind). The votes of a poll of up to five nodes hold its calls in one
// allocation (quorumVotes); the reply channel and the timer are pooled, and a poll whose
// late replies a goroutine hears gives the channel back once they are in.
package engine
