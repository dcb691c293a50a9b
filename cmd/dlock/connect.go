package main

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/quorum"
)

// checkTimeout bounds the PING that every command sends first, so that a wrong address or
// password is reported at once and plainly.
const checkTimeout = 5 * time.Second

// deployment is an open connection to the servers: one node (a standalone server or a
// Cluster), or the independent nodes of a quorum.
type deployment struct {
	nodes   []node
	cluster bool
}

// node is one deployment: for a quorum, one of its servers.
type node struct {
	rdb      redis.UniversalClient
	name     string                 // address, for output; never credentials
	failover *redis.FailoverOptions // a master found through Sentinel: how; else nil
}

// open makes the Redis clients; it does not connect yet.
func (s *servers) open() *deployment {
	if s.cluster != nil {
		opts := *s.cluster
		return &deployment{cluster: true, nodes: []node{{rdb: redis.NewClusterClient(&opts), name: "cluster " + strings.Join(opts.Addrs, ",")}}}
	}
	d := &deployment{}
	for _, n := range s.nodes {
		d.nodes = append(d.nodes, node{rdb: n.client(), name: n.label(), failover: n.failover})
	}
	return d
}

// Close closes the Redis clients.
func (d *deployment) Close() {
	for _, n := range d.nodes {
		_ = n.rdb.Close()
	}
}

// quorum reports whether the deployment is a Redlock quorum of several servers.
func (d *deployment) quorum() bool { return len(d.nodes) > 1 }

// majority is how many nodes must answer.
func (d *deployment) majority() int { return quorum.Majority(len(d.nodes)) }

// check pings every node at once. It fails (exit 69) when fewer than a majority answer,
// naming each failing node and what to do; failing nodes of a quorum that still has its
// majority are reported on warn.
func (d *deployment) check(ctx context.Context, warn func(string)) error {
	ctx, cancel := context.WithTimeout(ctx, checkTimeout)
	defer cancel()
	errs := make([]error, len(d.nodes))
	var wg sync.WaitGroup
	for i, n := range d.nodes {
		wg.Go(func() { errs[i] = n.ping(ctx) })
	}
	wg.Wait()
	var failed []string
	for i, err := range errs {
		if err != nil {
			failed = append(failed, fmt.Sprintf("%s: %s", d.nodes[i].name, explainRedis(err)))
		}
	}
	switch {
	case len(failed) == 0:
		return nil
	case len(d.nodes)-len(failed) >= d.majority():
		warn(fmt.Sprintf("warning: %d of %d servers cannot be used; the quorum goes on with the others: %s", len(failed), len(d.nodes), strings.Join(failed, "; ")))
		return nil
	case len(d.nodes) == 1:
		return fail(exitUnavailable, "cannot use Redis at %s", failed[0])
	}
	return fail(exitUnavailable, "cannot use a majority of the %d servers: %s", len(d.nodes), strings.Join(failed, "; "))
}

// ping checks that the node answers. When a master found through Sentinel does not, and
// the Sentinels are why, their errors say so: go-redis retries them until ctx ends and
// then says only that.
func (n node) ping(ctx context.Context) error {
	err := n.rdb.Ping(ctx).Err()
	if err == nil || n.failover == nil {
		return err
	}
	if why := askSentinels(context.WithoutCancel(ctx), n.failover); why != nil {
		return why
	}
	return err
}

// client returns a dlock Client on the deployment: New for one deployment, NewQuorum for
// several servers.
func (d *deployment) client(prefix string, logger *slog.Logger) (*dlock.Client, error) {
	opts := []dlock.Option{dlock.WithPrefix(prefix), dlock.WithLogger(logger)}
	if !d.quorum() {
		return dlock.New(d.nodes[0].rdb, opts...), nil
	}
	rdbs := make([]redis.UniversalClient, len(d.nodes))
	for i, n := range d.nodes {
		rdbs[i] = n.rdb
	}
	c, err := dlock.NewQuorum(rdbs, opts...)
	if err != nil {
		return nil, fail(exitUsage, "%v", err)
	}
	return c, nil
}

// connect parses the server flags, opens the deployment and checks it answers.
func (sf *serverFlags) connect(ctx context.Context, c *cli, cmd string) (*servers, *deployment, error) {
	s, err := sf.servers(c, cmd)
	if err != nil {
		return nil, nil, err
	}
	d, err := s.connect(ctx, c, cmd)
	return s, d, err
}

// connect opens the deployment and checks it answers; failing servers of a quorum that
// keeps its majority are reported on stderr.
func (s *servers) connect(ctx context.Context, c *cli, cmd string) (*deployment, error) {
	d := s.open()
	if err := d.check(ctx, func(msg string) { fmt.Fprintf(c.stderr, "dlock %s: %s\n", cmd, msg) }); err != nil {
		d.Close()
		return nil, err
	}
	return d, nil
}

// quorum reports whether the servers are the independent nodes of a Redlock quorum.
func (s *servers) quorum() bool { return s.cluster == nil && len(s.nodes) > 1 }
