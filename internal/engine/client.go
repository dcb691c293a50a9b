package engine

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/renew"
)

// closeTimeout bounds the releases that Close sends for the leases it still holds.
const closeTimeout = 5 * time.Second

// Client is the engine of one public Client: its nodes, what this process holds and waits
// for, and the renewal scheduler.
type Client struct {
	nodes []*Node
	cfg   ClientConfig
	pub   Public
	err   error  // a construction error, returned by every operation
	id    string // this Client's id in Mutex turn lists: random, one per process and Client
	owner owner  // the name of its holders, which its tokens lead to (owner.go)

	batchers []*batch.Batcher // one per node, in the order of nodes
	allNodes []int            // the index of every node, for sendEvery; read-only
	sched    *renew.Scheduler

	local local         // what this process holds and who waits for it (local.go)
	done  chan struct{} // closed by Close; ends every wait

	// inflight counts the Lock calls under way; Close waits for them (they end at once
	// when done is closed) before it releases what is held and stops the batchers, so that
	// an acquisition that lands during Close is seen and released (local.enter).
	inflight sync.WaitGroup

	stamps stampBook // the TimestampMutex deadlines this Client's holds own, by key

	turn  turn      // how long a release keeps the lock for the process whose turn it is
	hooks testHooks // set by tests only, before the Client is used
}

// testHooks let tests stop the engine at a point where a race can happen, to drive it on
// purpose. Nil hooks are skipped.
type testHooks struct {
	// renewCaptured runs in a renewal batch after the leases' lengths and numbers are
	// taken and before the calls are sent; the func it returns, if any, runs once the
	// batch's results are applied.
	renewCaptured func() (applied func())
}

// NewClient returns the engine of a Client of the deployments rdbs, each reached through
// the batcher at the same index (the transport, which the public package chooses).
func NewClient(rdbs []redis.UniversalClient, batchers []*batch.Batcher, cfg ClientConfig, pub Public) *Client {
	c := &Client{
		id:       newToken(),
		cfg:      cfg,
		pub:      pub,
		batchers: batchers,
		turn:     newTurn(turnLength),
		local:    newLocal(),
		done:     make(chan struct{}),
	}
	c.owner = newOwner(cfg, c.id, len(rdbs))
	for i, rdb := range rdbs {
		c.nodes = append(c.nodes, newNode(rdb, cfg.Logger, func(addr string) { nodeSilent(cfg.Observers, addr) }))
		c.allNodes = append(c.allNodes, i)
	}
	c.sched = renew.New(func(due []*renew.Entry) { renewBatch(c, due) }, expire)
	return c
}

// Failed returns a Client whose every operation returns err.
func Failed(err error, cfg ClientConfig, pub Public) *Client {
	return &Client{cfg: cfg, pub: pub, err: err, done: make(chan struct{})}
}

// Prefix is the namespace of the Client's keys.
func (c *Client) Prefix() string { return c.cfg.Prefix }

// Nodes are the Client's deployments, in the order it was given them.
func (c *Client) Nodes() []*Node { return c.nodes }

// PublicError is the public error of s (Public.Error), for the operations that fan out
// outside the engine (internal/inspect).
func (c *Client) PublicError(s Shortfall) error { return c.pub.Error(s) }

// SetTurnLength sets how long a Mutex turn lasts, for tests; call it before c is used.
func (c *Client) SetTurnLength(d time.Duration) { c.turn = newTurn(d) }

// SetRenewCaptured sets the renewCaptured test hook; call it before c is used.
func (c *Client) SetRenewCaptured(f func() (applied func())) { c.hooks.renewCaptured = f }

// Usable reports the error that stops every operation: a construction error or Close.
func (c *Client) Usable() error {
	if c.err != nil {
		return c.err
	}
	select {
	case <-c.done:
		return ErrClosed
	default:
		return nil
	}
}

// Close releases every lease the Client still holds (bounded by closeTimeout, after which
// their keys expire by themselves), ends every wait with ErrClosed and stops renewal. It
// does not close the Redis clients. Calling Close again returns nil.
func (c *Client) Close() error {
	if c.err != nil {
		return nil
	}
	if !c.local.close() {
		return nil
	}
	close(c.done)
	c.inflight.Wait()
	err := c.releaseAll()
	c.sched.Stop()
	c.retire()
	for _, n := range c.nodes {
		n.hub.Close()
	}
	for _, b := range c.batchers {
		b.Stop()
	}
	return err
}

// releaseAll releases every outer hold not yet ended, all at once, within closeTimeout.
func (c *Client) releaseAll() error {
	holds := c.local.live()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var errs []error
	var wg sync.WaitGroup
	var errMu sync.Mutex
	for _, h := range holds {
		wg.Go(func() {
			if err := h.release(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}
		})
	}
	wg.Wait()
	return errors.Join(errs...)
}
