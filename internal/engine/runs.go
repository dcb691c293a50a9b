package engine

import (
	"context"
	"time"
)

// Runs (FairMutex): a hand-over of the lock within this process, without a round trip,
// in request order.
//
// Every FairMutex waiter keeps its own entry in the lock's queue in Redis, and its token
// starts with this Client's id (memberToken), so that a script can tell the waiters of one
// process. A release that hands the lock to a waiter (fair_release.lua) also takes the
// live waiters of the same process queued right behind it out of the queue, at most
// maxRun, and names them in the grant: that is the grantee's run, and each gets a fencing
// token of the block the grant reserved. The grantee's Unlock then hands the hold to the
// first member of its run that still waits, as a Mutex hands off to its local queue
// (Hold.handOn): the lock key keeps the grantee's token, the successor inherits the
// deadline and the renewal, with the next fencing token and the rest of the run. No other
// process's waiter was queued between them, so the order across processes stays strict.
//
// A member waits as before: its attempts, refused while its process holds the lock, keep
// a mark of it in Redis instead of its queue entry (run_marks.lua), so that an attempt
// under way when the run was made does not queue it again. The rest of a run goes back to
// the head of the queue, in order: with the release, when it cannot go on here (a member
// locked a handle with other options, the lease has less than a third left, the Client is
// closing); with the grantee's attempt that confirms a grant it never heard of, or its
// leave if it gave up before; with a member's next attempt (within waiterRefresh) once
// the hold is lost; with any attempt that finds the lock free, so that no waiter of
// another process queued behind the run takes it first. A member that gives up is
// skipped; it leaves the queue as any waiter does.

// reasonRunSuperseded is why a run's hold ends when one of its members took the lock in
// Redis itself, which it can only once the key was deleted or expired under the run.
const reasonRunSuperseded = "a waiter of its run took the lock in Redis: the key had been deleted or had expired"

// maxRun bounds a run: with the grantee, one block of maxReserve fencing tokens.
const maxRun = maxReserve - 1

// runPrefixLen is how many leading characters of a FairMutex waiter token name its
// process (Client.id); the scripts take it as an argument.
const runPrefixLen = 16

var runPrefixLenArg any = ms(runPrefixLen)

// runMember is a FairMutex waiter of this process that a run may include; it lives in
// the waiter's request.
type runMember struct {
	ctx context.Context // the waiter's Lock ctx: a hold handed to it keeps its values
	cfg LockConfig      // the options of the handle it locked: a hold handed to it has them
	// wake (guarded by Client.mu) is the waiter's wake-up (waiting.wake), once it listens:
	// a hand-off sends on it. Before that, the waiter looks for a hand-off before each
	// attempt, and it pauses only after it listens.
	wake   chan struct{}
	handed *Hold // guarded by Client.mu: the hold handed to it, until taken
	inRun  bool  // guarded by Client.mu: a grant named it in a run
}

// memberToken returns a new FairMutex waiter token of c: its id's first runPrefixLen
// characters, then 128 random bits.
func (c *Client) memberToken() string { return newPrefixedToken(c.id[:runPrefixLen]) }

// addMember registers m, the waiter with token, which Lock with ctx for a handle with cfg.
func (c *Client) addMember(m *runMember, token string, ctx context.Context, cfg LockConfig) {
	m.ctx, m.cfg = ctx, cfg
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.members == nil {
		c.members = make(map[string]*runMember)
	}
	c.members[token] = m
}

// listening records the wake-up of the member m, if any.
func (c *Client) listening(m *runMember, wake chan struct{}) {
	if m == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	m.wake = wake
}

// dropMember removes the waiter with token; no hold is handed to it afterwards. It returns
// a hold handed to it that it did not take: the caller must end it.
func (c *Client) dropMember(token string, m *runMember) (untaken *Hold) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.members, token)
	untaken, m.handed = m.handed, nil
	return untaken
}

// takeRun returns the hold handed to m, if any; the caller now owns it.
func (c *Client) takeRun(m *runMember) *Hold {
	if m == nil {
		return nil
	}
	c.mu.Lock()
	h := m.handed
	m.handed = nil
	c.mu.Unlock()
	return handedOff(h, true)
}

// joinedRun records that a grant of this process named the waiters of run in its run.
func (c *Client) joinedRun(run []string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, token := range run {
		if m := c.members[token]; m != nil {
			m.inRun = true
		}
	}
}

// ownAcquisition is called when the attempt of the member m acquired h in Redis. If m was
// in a run, the run's hold may live on in this process although its key was deleted or
// expired (m could take the lock only then): every other hold of the key here is lost.
func (c *Client) ownAcquisition(m *runMember, h *Hold) {
	if m == nil {
		return
	}
	c.mu.Lock()
	var stale []*Hold
	if m.inRun {
		for x := range c.holds {
			if x != h && x.t.keys.Lock == h.t.keys.Lock && x.token != h.token {
				stale = append(stale, x)
			}
		}
	}
	c.mu.Unlock()
	for _, x := range stale {
		x.end(ErrLost, reasonRunSuperseded)
	}
}

// handRun passes h, which Unlock is ending, to the next member of its run that waits, and
// reports whether it did. When it does not, h.run is what is left of the run for the
// release to send back to Redis.
func (h *Hold) handRun() bool {
	if len(h.run) == 0 {
		return false
	}
	return h.handOn(func(ttl time.Duration, deadline time.Time) *Hold { return h.c.handToMember(h, ttl, deadline) })
}

// handToMember makes h's successor and hands it to the first member of h's run that still
// waits, or returns nil. It drops from h.run the members it passes over: those that gave
// up, and the one it hands to.
func (c *Client) handToMember(h *Hold, ttl time.Duration, deadline time.Time) *Hold {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	for len(h.run) > 0 {
		m := c.members[h.run[0]]
		switch {
		case m == nil: // gave up: it left the queue
			h.run = h.run[1:]
			continue
		case m.cfg != h.t.cfg:
			return nil // it asks Redis for a lease of its own making
		}
		next := newHold(h.t, h.token, h.fence+1, h.spare-1, ttl, deadline, m.ctx)
		next.run = h.run[1:]
		c.holds[next] = struct{}{}
		m.handed = next
		if m.wake != nil {
			select {
			case m.wake <- struct{}{}:
			default: // a wake-up is pending already
			}
		}
		return next
	}
	return nil
}

// leaveRuns takes the request's caller, whose Lock with ctx is over (acquired or not), out
// of the runs. A hold handed to it that it did not take is passed on (or released) if it
// gave up, and dropped as lost if it took the lock otherwise, which a member can only after
// the key was deleted under the run (ownAcquisition).
func (r *request) leaveRuns(ctx context.Context, acquired bool) {
	if r.member == nil {
		return
	}
	c := r.t.c
	h := c.dropMember(r.waiter, r.member)
	switch {
	case h == nil:
	case acquired:
		h.end(ErrLost, reasonRunSuperseded)
	default:
		release, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.nodeTimeout(r.t.cfg.TTL))
		defer cancel()
		_ = h.release(release)
	}
}
