package engine

import (
	"context"
	"time"

	"github.com/seed51c676c8/dlock/internal/notify"
)

// Tracking: how a waiter hears a release by another program (a Redlock client of another
// library, redis-cli), which publishes nothing, on a server with its default configuration.
// The waiter registers the lock key with CLIENT TRACKING on each node (notify.Hub.Track)
// when it starts listening; after each refusal it arms the nodes that refused
// (notify.Key.Arm: a read on the tracked connection, which both registers the key and
// shows whether it is still there), and the next write to the key there by anyone (DEL,
// UNLINK, a compare-and-delete script, SET over it, a renewal, its expiry) wakes it.
// Only the refusing nodes are armed: on a quorum the others are free or the waiter's own,
// and its own attempts would wake it.
//
// Where a node refuses tracking (Redis before 6, an ACL without CLIENT) or an arm fails,
// the waiter re-checks with a back-off from minBackoff up to maxRecheck, and only then.
// Keyspace events, when the server publishes them, wake it too.
//
// A Mutex that takes turns does not track: every dlock process waiting for it is in its
// turn list and is told of each release, which passes the lock in turn; a write to the key
// (the turn, the grant) would wake them all at once, and waiting on a turn refreshes
// the standing request every waiterRefresh anyway, so a key deleted by hand is seen
// within that. Bare keys (WithPrefix("")), shared with other libraries, take no turns.

// maxRecheck bounds the pause between re-checks of a held lock where a node refuses
// tracking.
const maxRecheck = 100 * time.Millisecond

// tracking is a waiter's registrations of the lock key, and its re-check back-off.
type tracking struct {
	keys    []*notify.Key // by node index; nil where the node refused or could not be asked
	backoff time.Duration
	blind   bool // the last arm left a refusing node unarmed: re-check within backoff
}

// track registers the lock key of r on every node for wake-ups on wake, or returns nil
// when r's kind does not track (see above). It sends nothing to Redis on one deployment.
func track(ctx context.Context, r *request, wake chan struct{}) *tracking {
	t, c := r.t, r.t.c
	if !t.policy.track || r.try || t.share.refreshes() {
		return nil
	}
	tk := &tracking{keys: make([]*notify.Key, len(c.nodes)), backoff: minBackoff}
	// Only a Cluster's slot map may need reading: bounded like a subscription.
	sub, cancel := context.WithTimeout(ctx, max(nodeTimeout(c, t.cfg.TTL), 100*time.Millisecond))
	defer cancel()
	for i, n := range c.nodes {
		k, err := n.hub.Track(sub, t.keys.Lock, t.keys.Lock, wake)
		if err != nil {
			c.cfg.Logger.Debug("dlock: cannot track the lock key; re-checking instead", "name", t.name, "node", n.Name, "err", err)
			continue
		}
		tk.keys[i] = k
	}
	return tk
}

// armed is one node's answer to arm.
type armed struct {
	free bool // the key was gone when the registration was made
	err  error
}

// arm arms the key on the given nodes (those that refused the last attempt), and reports
// whether one of them no longer has it: the caller then looks again at once. Nodes that
// do not answer within the per-node timeout, fail or refuse tracking leave the waiter
// blind, which bound then accounts for.
func (tk *tracking) arm(ctx context.Context, t *Target, nodes []int) (free bool) {
	if tk == nil {
		return false
	}
	tk.blind = false
	sub, cancel := context.WithTimeout(ctx, nodeTimeout(t.c, t.cfg.TTL))
	defer cancel()
	// Room for every answer: an arm that comes in after the wait gave up must not block.
	results := make(chan armed, len(nodes))
	asked := 0
	for _, i := range nodes {
		k := tk.keys[i]
		if k == nil {
			tk.blind = true
			continue
		}
		asked++
		// In a goroutine: a read on a hung node lasts the client's read timeout.
		go func() {
			gone, err := k.Arm(sub)
			results <- armed{free: gone, err: err}
		}()
	}
	for ; asked > 0; asked-- {
		select {
		case a := <-results:
			// A refusal is logged once per node, by notify.
			free = free || a.free
			tk.blind = tk.blind || a.err != nil
		case <-sub.Done():
			tk.blind = true
			return free
		}
	}
	return free
}

// bound returns the pause before the next attempt: sleep, or less while the waiter is
// blind to a refusing node (the back-off grows from minBackoff to maxRecheck).
func (tk *tracking) bound(sleep time.Duration) time.Duration {
	if tk == nil {
		return sleep
	}
	if !tk.blind {
		tk.backoff = minBackoff
		return sleep
	}
	d := jitter(tk.backoff)
	tk.backoff = min(2*tk.backoff, maxRecheck)
	return min(sleep, d)
}

func (tk *tracking) close() {
	if tk == nil {
		return
	}
	for _, k := range tk.keys {
		if k != nil {
			k.Close()
		}
	}
}
