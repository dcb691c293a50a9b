// Package dlocktest helps test code that uses dlock: it starts a Redis for a test, and
// checks what such code must get right, that a lease is lost on time, that work runs
// under its lock, and that storage refuses a stale fencing token.
//
// Server starts a real redis-server for one test and returns a dlock Client on it; Start
// returns the server itself, to kill, restart or flush it, and to make more Clients (one
// per simulated process). Embedded runs an in-process Redis (miniredis) instead, for
// machines without redis-server. Everything is stopped and closed by the test's Cleanup.
//
//	func TestReport(t *testing.T) {
//		client := dlocktest.Server(t)
//		r := report.New(client)
//		...
//	}
//
// Server and Start need a redis-server binary: $REDIS_SERVER, else redis-server on PATH.
// Without one the test fails, with a message that says how to install it; it is never
// skipped, so that a machine without Redis cannot pass tests it did not run.
//
// # What the embedded Redis does not model
//
// miniredis implements the commands dlock uses, and runs its scripts (in gopher-lua, a Lua
// 5.1 like Redis's) atomically, but it is not a Redis server:
//
//   - One process, in memory: no replication, persistence or failover, no Redis Cluster
//     (no hash slots, no MOVED, no sharded pub/sub), and no quorum of independent servers
//     to lose a majority of. Nothing fails unless the test closes it.
//   - Pub/sub is delivered in process, at once: no network latency, and no message lost
//     across a reconnect. Waiters wake sooner and more reliably than on a real server.
//   - No CLIENT TRACKING and no keyspace notifications: a waiter does not wake when a
//     program other than dlock deletes the lock's key, only at the holder's expiry.
//   - Keys expire in step with the wall clock, but lazily: when a command next looks,
//     not by a background cycle.
//   - Its Lua (gopher-lua) has cjson but no bit, struct or cmsgpack library, and a new
//     interpreter runs each script: dlock's scripts need no more, a script of yours may.
//   - Throughput and latency are nothing like a real server's.
//
// Use Server for tests of timing, fairness and failures, and Embedded where a Redis is
// only needed to run the code.
package dlocktest
