package faults

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/faultproxy"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// deployment is a run's servers: the lock's nodes (one, or a quorum) and, apart, the
// storage that the fencing tokens protect and where the counters live.
type deployment struct {
	nodes []*redistest.Server
	store *redistest.Server
	data  *redis.Client // on the storage
}

// deploy starts n lock servers with opts, and the storage.
func deploy(r *run, n int, opts ...redistest.Option) *deployment {
	r.t.Helper()
	d := &deployment{nodes: redistest.StartNodes(r.t, n, opts...), store: redistest.Start(r.t)}
	d.data = d.store.Client(r.t)
	return d
}

// addrs returns the nodes' addresses.
func (d *deployment) addrs() []string { return serverAddrs(d.nodes) }

func serverAddrs(ss []*redistest.Server) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = s.Addr
	}
	return out
}

// spawn starts an agent that locks through nodes (the nodes' or proxies' addresses).
func (d *deployment) spawn(r *run, name string, nodes []string) *child {
	r.t.Helper()
	return spawn(r, agentConfig{Name: name, Nodes: nodes, Store: d.store.Addr})
}

// clients returns a plain client per node, closed by the run's cleanup.
func (d *deployment) clients(r *run) []*redis.Client {
	out := make([]*redis.Client, len(d.nodes))
	for i, s := range d.nodes {
		out[i] = s.Client(r.t)
	}
	return out
}

// proxies puts a proxy in front of every node.
func (d *deployment) proxies(r *run) []*faultproxy.Proxy {
	out := make([]*faultproxy.Proxy, len(d.nodes))
	for i, s := range d.nodes {
		out[i] = faultproxy.New(r.t, s.Addr)
	}
	return out
}

func proxyAddrs(ps []*faultproxy.Proxy) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.Addr
	}
	return out
}

// lockOnTwo has agent a take the lock name (TTL ttl) while its link to the third of three
// nodes is cut, so that only nodes 1 and 2 hold a's key. The link stays cut until a's
// call to node 3, queued while the link was down, has passed its deadline (the per-node
// timeout, TTL/10): a call that is merely late may still land. It reports the lease, or
// false (with a violation of no-errors) if a could not take it.
func lockOnTwo(r *run, d *deployment, ps []*faultproxy.Proxy, a *child, name string, ttl time.Duration) (event, bool) {
	ps[2].Cut(r.t)
	a.send(command{Op: "lock", ID: "a", Name: name, TTL: ttl})
	e, ok := a.expectEv(evAcquired, "a", chkNoErrors)
	r.sleep(ttl / 8)
	ps[2].Restore(r.t)
	if !ok {
		return e, false
	}
	if n, err := d.nodes[2].Client(r.t).Exists(context.Background(), lockKey(name)).Result(); err != nil || n != 0 {
		r.fatalf("setup: node 3 has the lock key after all (%d, %v)", n, err)
	}
	return e, true
}
