package dlock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/notify"
	"github.com/seed51c676c8/dlock/internal/quorum"
	"github.com/seed51c676c8/dlock/internal/renew"
)

// pipelinesInFlight is how many lanes of keys a Client's calls are spread over on a
// Cluster or Ring (see internal/batch), each lane with one go-redis pipeline in flight:
// enough that one hung node holds up only the calls of its lanes, few enough that a batch
// forms under load. One server gets one lane: its calls all wait for that server anyway,
// and the calls made during a round trip then go out together in the next. Measured with
// 32 goroutines (BENCHMARKS.md), one lane carried 1.7x the Lock+Unlock pairs of four, at
// 70% of the client CPU per pair: fewer, fuller pipelines.
const pipelinesInFlight = 4

// closeTimeout bounds the releases that Close sends for the leases it still holds.
const closeTimeout = 5 * time.Second

// Client hands out locks on one Redis deployment (New) or on a quorum of independent
// deployments (NewQuorum). It is safe for concurrent use. Create one per process and
// Close it on shutdown; it does not close the Redis clients it was given.
type Client struct {
	nodes []*node
	cfg   clientConfig
	err   error  // a construction error, returned by every operation
	id    string // this Client's id in Mutex turn lists: random, one per process and Client

	batchers []*batch.Batcher // one per node, in the order of nodes
	sched    *renew.Scheduler

	mu          sync.Mutex
	queues      map[string]*localQueue // guarded by mu: waiters and holds of this process, by lock key
	spareQueues []*localQueue          // guarded by mu: idle queues kept for reuse
	holds       map[*hold]struct{}     // guarded by mu: outer holds not yet ended, released by Close
	closed      bool                   // guarded by mu
	done        chan struct{}          // closed by Close; ends every wait

	// inflight counts the Lock calls under way; Close waits for them (they end at once
	// when done is closed) before it releases what is held and stops the batchers, so that
	// an acquisition that lands during Close is seen and released. Add happens under mu
	// while closed is false, so never after Close began to Wait.
	inflight sync.WaitGroup

	turn  turn      // how long a release keeps the lock for the process whose turn it is
	hooks testHooks // set by tests only (export_test.go), before the Client is used
}

// testHooks let tests stop the engine at a point where a race can happen, to drive it on
// purpose. Nil hooks are skipped.
type testHooks struct {
	// renewCaptured runs in a renewal batch after the leases' lengths and numbers are
	// taken and before the calls are sent; the func it returns, if any, runs once the
	// batch's results are applied.
	renewCaptured func() (applied func())
}

// enter registers a Lock call under way; the caller calls c.inflight.Done when it returns.
func (c *Client) enter() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return ErrClosed
	}
	c.inflight.Add(1)
	return nil
}

// New returns a Client for one Redis deployment: a standalone server, a Sentinel-managed
// failover client or a Cluster. A nil rdb or an invalid option gives a Client whose every
// operation returns an error that says so.
//
// Every command goes through rdb, so its hooks (tracing, metrics) and MaxRetries apply to
// dlock's traffic. The script calls of all goroutines share round trips: the calls made
// while an earlier round trip is under way go out together in the next go-redis pipeline
// (one in flight per server; on a Cluster, a few, by key); renewals go out as one pipeline
// per node per tick.
func New(rdb redis.UniversalClient, opts ...Option) *Client {
	if isNil(rdb) {
		return failedClient(errors.New("dlock: New was given a nil Redis client: pass a *redis.Client or *redis.ClusterClient"), opts)
	}
	c, err := newClient([]redis.UniversalClient{rdb}, opts)
	if err != nil {
		return failedClient(err, opts)
	}
	return c
}

// NewQuorum returns a Client that runs the Redlock algorithm over independent Redis
// deployments: each operation goes to every node at once and counts only with a majority
// (len(nodes)/2 + 1). Use an odd number of nodes, usually 3 or 5, that share no data: not
// the replicas of one master. It returns an error for an empty list, a nil node, a node
// given twice or an invalid option.
func NewQuorum(nodes []redis.UniversalClient, opts ...Option) (*Client, error) {
	if len(nodes) < 1 {
		return nil, errors.New("dlock: NewQuorum needs at least one node: give it 3 or 5 independent Redis servers")
	}
	seen := make(map[string]int, len(nodes))
	for i, rdb := range nodes {
		if isNil(rdb) {
			return nil, fmt.Errorf("dlock: NewQuorum: node %d is nil: every node must be a Redis client", i)
		}
		for j := range i {
			if nodes[j] == rdb {
				return nil, fmt.Errorf("dlock: NewQuorum: nodes %d and %d are the same client: a quorum needs distinct servers, or one server would count twice", j, i)
			}
		}
		name := nodeName(rdb)
		if !strings.Contains(name, ":") || name == "FailoverClient" {
			continue // no address to compare (a Sentinel failover client, a custom client)
		}
		if j, dup := seen[name]; dup {
			return nil, fmt.Errorf("dlock: NewQuorum: nodes %d and %d are both %s: a quorum needs distinct servers, or one server would count twice", j, i, name)
		}
		seen[name] = i
	}
	return newClient(nodes, opts)
}

func newClient(rdbs []redis.UniversalClient, opts []Option) (*Client, error) {
	cfg := newClientConfig(opts)
	if cfg.err != nil {
		return nil, cfg.err
	}
	c := &Client{
		id:     newToken(),
		cfg:    cfg,
		turn:   newTurn(turnLength),
		queues: make(map[string]*localQueue),
		holds:  make(map[*hold]struct{}),
		done:   make(chan struct{}),
	}
	for _, rdb := range rdbs {
		n := &node{rdb: rdb, name: nodeName(rdb), hub: notify.NewHub(rdb, cfg.logger)}
		switch r := rdb.(type) {
		case *redis.ClusterClient:
			n.cluster = true
		case *redis.Client:
			n.db = r.Options().DB
		}
		c.nodes = append(c.nodes, n)
		c.batchers = append(c.batchers, newBatcher(rdb))
	}
	c.sched = renew.New(c.renewBatch, c.expire)
	return c, nil
}

// newBatcher starts the carrier of rdb's calls: go-redis pipelines over one lane for a
// single server, over a few for a Cluster or Ring (see pipelinesInFlight).
func newBatcher(rdb redis.UniversalClient) *batch.Batcher {
	if _, one := rdb.(*redis.Client); one {
		return batch.New(rdb, 1)
	}
	return batch.New(rdb, pipelinesInFlight)
}

func failedClient(err error, opts []Option) *Client {
	return &Client{cfg: newClientConfig(opts), err: err, done: make(chan struct{})}
}

// isNil reports a nil client, including a nil pointer in a non-nil interface.
func isNil(rdb redis.UniversalClient) bool {
	switch r := rdb.(type) {
	case nil:
		return true
	case *redis.Client:
		return r == nil
	case *redis.ClusterClient:
		return r == nil
	case *redis.Ring:
		return r == nil
	}
	return false
}

// nodeName names a deployment in errors: its address, never its credentials.
func nodeName(rdb redis.UniversalClient) string {
	switch r := rdb.(type) {
	case *redis.Client:
		return r.Options().Addr
	case *redis.ClusterClient:
		return fmt.Sprintf("cluster%v", r.Options().Addrs)
	case *redis.Ring:
		return fmt.Sprintf("ring%v", r.Options().Addrs)
	}
	return fmt.Sprintf("%T", rdb)
}

// nodeTimeout is how long one node may take to answer one call. On a quorum it is short
// (quorum.NodeTimeout), since a hung node must cost a fraction of the lease and the other
// nodes can decide without it; one deployment has no other node to turn to, so it gets
// longer (a third of the lease, at most a second), which a loaded server needs more than
// a quick verdict.
func (c *Client) nodeTimeout(ttl time.Duration) time.Duration {
	if len(c.nodes) > 1 {
		return quorum.NodeTimeout(ttl)
	}
	return min(max(ttl/3, 5*time.Millisecond), time.Second)
}

// usable reports the error that stops every operation: a construction error or Close.
func (c *Client) usable() error {
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

// Close releases every lease the Client still holds (bounded by a few seconds, after
// which their keys expire by themselves), ends every wait with ErrClosed and stops
// renewal. It does not close the Redis clients. Calling Close again returns nil.
func (c *Client) Close() error {
	if c.err != nil {
		return nil
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.done)
	c.mu.Unlock()
	c.inflight.Wait()
	c.mu.Lock()
	holds := make([]*hold, 0, len(c.holds))
	for h := range c.holds {
		holds = append(holds, h)
	}
	c.mu.Unlock()

	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	var errs []error
	var wg sync.WaitGroup
	var errMu sync.Mutex
	for _, h := range holds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := h.release(ctx); err != nil && !errors.Is(err, ErrNotHeld) {
				errMu.Lock()
				errs = append(errs, err)
				errMu.Unlock()
			}
		}()
	}
	wg.Wait()
	c.sched.Stop()
	for _, n := range c.nodes {
		n.hub.Close()
	}
	for _, b := range c.batchers {
		b.Stop()
	}
	return errors.Join(errs...)
}
