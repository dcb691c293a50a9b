package engine

import (
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// Wait lists: a kind with policy.waitList gives each request an id (request.waiter) that
// its attempts list in Redis, where it keeps its place and keeps others out (a waiting
// writer keeps new readers out), and that dies unless refreshed within waiterTTL.

// leaveWaitList takes r's waiter id out of the wait lists on every node, without waiting
// for the replies, so that it does not hold up the waiters behind it: r gave up, or was
// served on the other nodes. An entry a node misses expires by itself.
func leaveWaitList(r *request) {
	t := r.t
	sendEvery(t.c, time.Duration(waiterTTL)*time.Millisecond, func(call *batch.Call) bool {
		return t.scheme.leave(t, r, call)
	})
}
