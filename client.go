package dlock

import (
	"errors"
	"fmt"
	"strings"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/engine"
)

// Client hands out locks on one Redis deployment (New) or on a quorum of independent
// deployments (NewQuorum). It is safe for concurrent use. Create one per process and
// Close it on shutdown; it does not close the Redis clients it was given.
type Client struct {
	e *engine.Client
}

// New returns a Client for one Redis deployment: a standalone server, a Sentinel-managed
// failover client or a Cluster. A nil rdb or an invalid option gives a Client whose every
// operation (Lock, TryLock, Acquire, Inspect...) returns an error that says so; New also
// logs that error once, at Error level, through the logger of WithLogger (given before or
// after the invalid option).
//
// Every command goes through rdb, so its hooks (tracing, metrics) and MaxRetries apply to
// dlock's traffic. The script calls of all goroutines share round trips: the calls made
// while an earlier round trip is under way go out together in the next go-redis pipeline
// (one in flight per server; on a Cluster, a few, by key); renewals go out as one pipeline
// per node per tick.
func New(rdb redis.UniversalClient, opts ...Option) *Client {
	if batch.IsNilClient(rdb) {
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
		if batch.IsNilClient(rdb) {
			return nil, fmt.Errorf("dlock: NewQuorum: node %d is nil: every node must be a Redis client", i)
		}
		for j := range i {
			if nodes[j] == rdb {
				return nil, fmt.Errorf("dlock: NewQuorum: nodes %d and %d are the same client: a quorum needs distinct servers, or one server would count twice", j, i)
			}
		}
		name := engine.NodeName(rdb)
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
	if cfg.Err != nil {
		return nil, cfg.Err
	}
	if err := checkAcks(rdbs, cfg.Acks); err != nil {
		return nil, err
	}
	for _, rdb := range rdbs {
		if _, ok := rdb.(*redis.Ring); ok {
			return nil, errRing
		}
	}
	batchers := make([]*batch.Batcher, len(rdbs))
	for i, rdb := range rdbs {
		batchers[i] = newTransport(rdb, cfg.Acks)
	}
	return &Client{e: engine.NewClient(rdbs, batchers, cfg, public)}, nil
}

// errRing refuses a redis.Ring. Its shards are independent servers that go-redis picks
// by the first key of a command and the first channel of a subscription, so a waiter's one
// subscription for all its channels cannot be made, and several names' keys in one
// script would land on one shard.
var errRing = errors.New("dlock: a *redis.Ring is not supported: its shards are independent servers, so one lock's keys, its waiters' subscriptions and several names locked together cannot be kept on the right shard; use a Redis Cluster (*redis.ClusterClient) to spread locks over servers, or NewQuorum with a *redis.Client per server for Redlock")

// pipelinesInFlight is how many lanes of keys a Client's calls are spread over on a
// Cluster (see internal/batch), each lane with one go-redis pipeline in flight:
// enough that one hung node holds up only the calls of its lanes, few enough that a batch
// forms under load. One server gets one lane: its calls all wait for that server anyway,
// and the calls made during a round trip then go out together in the next. Measured with
// 32 goroutines (BENCHMARKS.md), one lane carried 1.7x the Lock+Unlock pairs of four, at
// 70% of the client CPU per pair: fewer, fuller pipelines.
const pipelinesInFlight = 4

// newTransport starts the carrier of rdb's calls (see New): go-redis pipelines over one
// lane for a single server, over a few for a Cluster; with acks, pipelines that
// end with WAIT (batch.NewAcked).
func newTransport(rdb redis.UniversalClient, acks batch.Acks) *batch.Batcher {
	lanes := pipelinesInFlight
	if _, one := rdb.(*redis.Client); one {
		lanes = 1
	}
	if acks.On() {
		return batch.NewAcked(rdb, lanes, acks)
	}
	return batch.New(rdb, lanes)
}

// failedClient is New's Client when it cannot work: its signature has no error, so it
// logs err once, here, and every operation returns it.
func failedClient(err error, opts []Option) *Client {
	cfg := newClientConfig(opts)
	cfg.Logger.Error("dlock: New: every operation of this Client will fail", "err", err)
	return &Client{e: engine.Failed(err, cfg, public)}
}

// Close releases every lease the Client still holds (bounded by a few seconds, after
// which their keys expire by themselves), ends every wait with ErrClosed and stops
// renewal. It does not close the Redis clients. Calling Close again returns nil.
func (c *Client) Close() error { return c.e.Close() }
