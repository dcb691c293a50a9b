// Package dlock provides distributed locks on Redis: mutexes whose leases renew
// themselves and say when they are lost, with fencing tokens, waiting without polling,
// and the Redlock quorum over independent servers.
//
// A Client is made from one Redis deployment with New (a standalone server, a Sentinel
// failover client or a Cluster) or from several independent deployments with NewQuorum. A
// Mutex is a handle on one name; locking it returns a Lease, which is held until it is
// unlocked or lost:
//
//	lease, err := client.Mutex("nightly-report").Lock(ctx)
//	if err != nil {
//		return err
//	}
//	defer lease.Unlock(context.Background())
//	return buildReport(lease.Context()) // stops when the lease is lost
//
// FairMutex grants in request order across processes, RWMutex admits many readers or one
// writer, Semaphore hands out at most a fixed number of permits, and MultiMutex locks
// several names at once, all or none; each acquisition of any of them is a Lease with the
// same guarantees. Each kind's Do (and RWMutex.RDo) runs a function under the lock and
// unlocks after it; LeaseFrom gives that function its lease from its ctx. Election elects
// one leader per name: each term is such a Lease, with a value others read and observe.
//
// TimestampMutex speaks the legacy SETNX + GETSET timestamp protocol, for a service that
// joins a system whose other clients still lock that way. Its key holds a deadline on
// the writer's wall clock, which every client compares with its own, so it trusts every
// client's clock and has no owner token: it is unsafe (its documentation says how) and
// is meant for the time until those clients move to a Mutex. What follows holds for the
// other kinds; where TimestampMutex differs, its documentation says so.
//
// # What is guaranteed
//
// Exclusivity, in time: while a Mutex or FairMutex Lease is held, no other Lease of the
// same name is held, until its ValidUntil (for an RWMutex: no writer beside another writer
// or a reader; for a Semaphore: no more permits out than its size). ValidUntil is computed on the local monotonic clock from the
// instant before the request was sent, minus a drift allowance (TTL*factor + 2ms), so that
// a lease is never taken to last longer than Redis keeps its key. Renewal moves it
// forward every TTL/3. Renewals and Extends may reach Redis in another order than they
// were sent, even after their caller gave up on them, so they only lengthen the key; an
// Extend to a shorter TTL moves ValidUntil down as soon as it is called and leaves the
// key's expiry as it was. A holder that cannot renew before ValidUntil loses the lease at
// ValidUntil at the latest, whether or not Redis can be reached: Done is closed, Context
// is cancelled and Err returns ErrLost.
//
// Ownership is per acquisition: each one writes a fresh 128-bit random token, and only the
// holder of that token can extend or release the lock. A Lease may be unlocked from any
// goroutine. Re-entry is by context, not by goroutine: a Lock whose ctx carries a live
// lease of the same lock (a lease's Context or a context derived from one) returns at
// once with a lease that shares the hold. A Lock whose ctx carries a live lease of the
// same Client that holds the name by another kind of lock (a Mutex, FairMutex,
// TimestampMutex, MultiMutex or RWMutex write lease) returns an error at once instead of
// waiting for itself, except an RWMutex RLock under its write lease, which downgrades.
//
// Fencing: Token is strictly greater than the token of every earlier acquisition of the
// same name, across processes and client restarts. Give it to the storage you protect and
// have it refuse writes with a smaller token than it has seen: that is what makes a
// holder that was paused past its lease (a long GC pause, a stopped VM) harmless. A
// MultiMutex lease has a token for each name (Tokens), each with that guarantee for its
// name, whichever of Mutex and MultiMutex took the name before; it gives all its names
// one token, Token.
//
// All or none: a MultiMutex takes its names in one fixed order, by one script on a server
// (or on each node of a quorum) that takes them only if none is held, and on a Redis
// Cluster by one script per hash slot, in slot order, giving back the slots it took when a
// later one is held. It never holds some names while it waits for others, so MultiMutexes
// over overlapping sets cannot deadlock, and after an error it holds none of them. Its
// lease is renewed for every name together and is lost when any one of them is, and the
// others are then given back. Each name keeps a Mutex's keys: a MultiMutex and a Mutex of
// one of its names exclude each other, and each one's release wakes the other's waiters.
// A MultiMutex is not re-entrant: Lock with a context that carries a live lease of the same
// Client on one of its names returns an error rather than wait for itself.
//
// Waiting does not poll. A waiter wakes when a dlock holder releases (the release
// publishes), when the holder's lease runs out (the refused attempt learned its remaining
// time), and when another program releases the key: a Redlock client of another library
// or redis-cli deletes, unlinks or overwrites it. A Mutex waiter is told of that by CLIENT
// TRACKING, which needs Redis 6 or later and no server configuration. Where the server
// refuses it (an older server, or an ACL user without CLIENT ID, CLIENT TRACKING or the
// channel __redis__:invalidate), the waiter re-checks instead, with a back-off from a few
// milliseconds up to 100ms, and the Client logs a warning that says so, once per node
// (WithLogger). Keyspace events (notify-keyspace-events containing K, g and x), if the
// server publishes them, wake waiters too. Tracking costs a waiter one read per wake-up,
// and the Client two connections per node, from its first tracked wait until Close; an
// uncontended Lock and Unlock send nothing more. A Mutex that takes turns (below) does
// not track: its key is released by dlock, which publishes, and a key deleted by hand is
// noticed within about a second. Goroutines of one process that wait for the same Mutex
// queue in order, and only the first of them asks Redis.
// A waiter that holds a place in a Redis queue (FairMutex, Semaphore, an RWMutex writer)
// keeps it for as long as it waits, and one that dies is skipped within 3 seconds.
//
// A hot Mutex stays busy and fair. Unlock hands the lock to the next goroutine of the same
// process that waits for it, without a round trip; the successor's fencing token is still
// above its predecessor's and below any later acquisition's. Between processes, the lock
// goes to the process that has waited longest, so no process waits while others take it
// again and again. A process that dies while it waits can keep the lock for up to 3s
// after it is granted. Clients of other libraries that SET the key directly take no part
// in this, and with WithPrefix("") (keys shared with them) Mutexes take no turns either,
// so that those clients are not starved. On a quorum, the lock goes round within a
// process only. A NoRenew lease is never handed on: it lasts its TTL from its own
// acquisition.
//
// # What is not guaranteed
//
// A lease is a promise about time. If the holder's process is paused longer than its
// lease (or the clocks of the client and servers drift apart faster than the drift
// allowance), another holder may take the lock while the first still believes it holds
// it; the first learns it only when it looks at its Context, Err or Done. Only fencing
// tokens, checked by the protected storage, protect against that.
//
// A single Redis deployment is as available and as durable as that deployment: with
// asynchronous replication, a failover may lose a lock that was just granted, and a
// second holder may get it while the first still holds its lease. WithReplicaAcks makes
// every write wait until replicas have it (WAIT), so that a lock no replica acknowledged
// is refused (ErrNotReplicated) and one they did survives a failover to one of them; it
// narrows the window but does not close it, since a replica that did not acknowledge can
// still be promoted. Use NewQuorum over independent servers when that matters, fencing
// tokens always, and see docs/replicas.md and docs/quorum.md in the repository.
//
// Pub/sub delivers at most once. A wake-up lost across a reconnect delays a waiter until
// the holder's lease would have run out, never longer.
//
// # Observing
//
// WithObserver makes an Observer receive what the Client's locks do: each Lock, TryLock or
// Acquire (WaitStarted, then each attempt in Redis with its verdict, then WaitEnded with
// the time waited and the fencing token or the error), each hold's end (released, or lost
// with its cause: expired, or taken from Redis), renewals that failed and recovered,
// hand-offs within the process and grants between processes, and quorum nodes that went
// silent. Calls are synchronous, on the goroutines doing the work, and the events of one
// lease arrive in order; an Observer must not block, nor lock, unlock or extend (it may
// start a goroutine that does). With no Observer set, no event is built and Lock allocates
// nothing more. The events are defined, with their contract, in package
// github.com/seed51c676c8/dlock/observe, which imports nothing of dlock's; Observer, the
// event types, Verdict and LossCause here are aliases of its types. The modules
// github.com/seed51c676c8/dlock/extra/prometheus (package dlockprom) and
// github.com/seed51c676c8/dlock/extra/otel (package dlockotel) turn the events into
// Prometheus metrics, and into OpenTelemetry spans and metrics.
//
// Every command goes through the go-redis client given to New, so its hooks see dlock's
// scripts. The round trip that carries the scripts of a Lock, Extend or Unlock has the
// values of the ctx given to it, when it carries no other caller's calls (dlock shares
// round trips between callers): a tracing hook such as redisotel then makes its span a
// child of the caller's. Renewals belong to no caller and carry none. A client with
// ContextTimeoutEnabled, which ends a round trip's reads and writes at its deadline, lets
// a Lock or Unlock on one node send its scripts from the caller's goroutine when none of
// the Client's other calls to that server is queued or under way, which is quicker than
// handing them to dlock's goroutine for the server (a ctx cancelled meanwhile is noticed
// when that round trip ends, within the per-node timeout); without it, a server that
// stopped answering could hold such a caller until ReadTimeout, so dlock's goroutine
// sends them.
//
// # Testing
//
// Package dlocktest starts a real redis-server, or an embedded Redis, for a test, and
// checks what code under a lock must get right: that a lease is lost in time when Redis
// goes away, that work runs while its lock is held, and that storage refuses a stale
// fencing token.
//
// # Keys
//
// A Mutex called name uses the string key prefix+name (the default prefix is "dlock:"),
// which holds the holder's token with a TTL, and a fencing counter {prefix+name}:fence
// that never expires; while processes wait, also a list of them, {prefix+name}:turns, a
// hash of their standing requests, {prefix+name}:asks; for a moment after a release, the
// lock key may hold "turn:" and the id of the process it is promised to. Every kind
// remembers each token it served by a key, {prefix+name}:gone:<token>, that lives until
// the token's lease ends and 10 seconds more, so that a copy of an acquisition delivered
// late takes nothing. All share one Redis Cluster hash slot. A TimestampMutex uses the
// same lock key and fencing counter; its lock key holds the holder's deadline in unix
// milliseconds. A MultiMutex uses the lock key and fencing counter of a Mutex of each of
// its names. An Election uses a Mutex's keys and a hash, {prefix+name}:leader, the record
// of the term that wrote last, which expires with the lock; it publishes its writes there.
package dlock
