package dlock

import (
	"time"

	"github.com/seed51c676c8/dlock/internal/engine"
)

// Hooks for the external tests.

// LocalWaiters returns how many goroutines of m's Client wait for m in its local queue.
func LocalWaiters(m *Mutex) int { return m.t.LocalWaiters() }

// SetTurnLength sets how long a Mutex turn lasts, for the releases and the waits of c.
// Call it before c is used.
func SetTurnLength(c *Client, d time.Duration) { c.e.SetTurnLength(d) }

// SetRenewCaptured makes f run in every renewal batch of c between taking the leases'
// lengths and sending the calls (a test blocks there to let an Extend overtake a
// renewal); the func f returns, if any, runs once the batch's results are applied.
func SetRenewCaptured(c *Client, f func() (applied func())) { c.e.SetRenewCaptured(f) }

// LeaveTurns sends m's leave of the turns for a standing request with token ask, as the
// last local waiter that gives up does.
func LeaveTurns(m *Mutex, ask string) { engine.LeaveTurns(m.t, ask) }
