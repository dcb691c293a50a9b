package main

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// defaultServer is used when neither --redis nor DLOCK_REDIS names a server.
const defaultServer = "redis://127.0.0.1:6379"

// servers is what --redis, DLOCK_REDIS, --cluster and the --tls-* flags describe: one
// deployment, the independent nodes of a Redlock quorum, or one Redis Cluster. It holds
// credentials: print only describe(), never the URLs or the options.
type servers struct {
	urls    []string              // as given with the --tls-* flags added: for worker processes (through the environment)
	cluster *redis.ClusterOptions // --cluster: one Cluster, seeded by every URL's addresses
	nodes   []nodeOptions         // otherwise: one deployment, or the nodes of a quorum
}

// nodeOptions are the options of one deployment: a standalone server, or a master found
// through its Sentinels. Exactly one is set.
type nodeOptions struct {
	server   *redis.Options
	failover *redis.FailoverOptions
}

// splitServerList splits a comma-separated DLOCK_REDIS value; empty entries are dropped.
// A comma inside a password must be percent-encoded (%2C); the commas between the
// Sentinels of a Sentinel URL are kept.
func splitServerList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		switch {
		case part == "":
		case len(out) > 0 && !strings.Contains(part, "://") && inHostList(out[len(out)-1]):
			out[len(out)-1] += "," + part
		default:
			out = append(out, part)
		}
	}
	return out
}

// inHostList reports whether u, cut at a comma, ends inside the host list of a Sentinel URL.
func inHostList(u string) bool {
	_, _, _, _, rest := splitURL(u)
	return isSentinel(schemeOf(u)) && !strings.ContainsAny(rest, "/?#")
}

// parseServers parses server URLs, with the TLS flags tf. The URLs' passwords are given to
// red first, and every error it returns has been scrubbed by red: none contains a password.
func parseServers(urls []string, cluster bool, tf tlsFlags, red *redactor) (*servers, error) {
	for _, u := range urls {
		red.addURL(u)
	}
	s, err := parseServersRaw(urls, cluster, tf)
	if err != nil {
		return nil, fmt.Errorf("%s", red.String(err.Error()))
	}
	return s, nil
}

func parseServersRaw(urls []string, cluster bool, tf tlsFlags) (*servers, error) {
	if len(urls) == 0 {
		return nil, fmt.Errorf("no Redis server given: use --redis URL, DLOCK_REDIS or REDIS_URL")
	}
	urls, err := tf.applyTo(urls)
	if err != nil {
		return nil, err
	}
	s := &servers{urls: urls}
	if cluster {
		return s, s.parseCluster()
	}
	seen := map[string]int{}
	for i, raw := range urls {
		n, err := parseNode(raw)
		if err != nil {
			return nil, err
		}
		if j, dup := seen[n.addr()]; dup {
			return nil, fmt.Errorf("servers %d and %d are both %s: a quorum needs distinct, independent servers", j+1, i+1, n.addr())
		}
		seen[n.addr()] = i
		s.nodes = append(s.nodes, n)
	}
	return s, nil
}

// parseNode parses the URL of one deployment: a standalone server or a Sentinel URL.
func parseNode(raw string) (nodeOptions, error) {
	p, err := splitServerURL(raw, "redis", "rediss", "unix", sentinelScheme, sentinelTLSScheme)
	if err != nil {
		return nodeOptions{}, err
	}
	if p.sentinel() {
		o, err := p.failoverOptions()
		return nodeOptions{failover: o}, err
	}
	o, err := redis.ParseURL(p.u.String())
	if err != nil {
		return nodeOptions{}, badURL(raw, err)
	}
	if o.TLSConfig, err = p.tlsConfig(o.TLSConfig); err != nil {
		return nodeOptions{}, err
	}
	return nodeOptions{server: o}, nil
}

// parseCluster reads every URL as a seed of one Cluster: they must agree on the scheme,
// the credentials and the TLS parameters, and their addresses (with any ?addr=
// parameters) are merged.
func (s *servers) parseCluster() error {
	var first *parsedURL
	for i, raw := range s.urls {
		p, err := splitServerURL(raw, "redis", "rediss")
		if err != nil {
			return err
		}
		opts, err := redis.ParseClusterURL(p.u.String())
		if err != nil {
			return badURL(raw, err)
		}
		if i == 0 {
			first, s.cluster = p, opts
			s.cluster.TLSConfig, err = p.tlsConfig(opts.TLSConfig)
			if err != nil {
				return err
			}
			continue
		}
		if opts.Username != s.cluster.Username || opts.Password != s.cluster.Password || p.scheme != first.scheme || !maps.Equal(p.params, first.params) {
			return fmt.Errorf("with --cluster every URL is a seed of the same Cluster: URL %d differs from the first in its user, password, scheme or TLS parameters; give one URL, or URLs with the same credentials", i+1)
		}
		for _, a := range opts.Addrs {
			if !slices.Contains(s.cluster.Addrs, a) {
				s.cluster.Addrs = append(s.cluster.Addrs, a)
			}
		}
	}
	return nil
}

// describe names the servers for output: addresses, database, TLS; never credentials.
func (s *servers) describe() string {
	if s.cluster != nil {
		d := "the Redis Cluster at " + strings.Join(s.cluster.Addrs, ", ")
		if s.cluster.TLSConfig != nil {
			d += " (TLS)"
		}
		return d
	}
	names := make([]string, len(s.nodes))
	for i, n := range s.nodes {
		names[i] = n.label()
	}
	if len(names) == 1 {
		return names[0]
	}
	return fmt.Sprintf("a quorum of %d servers: %s", len(names), strings.Join(names, ", "))
}

// addr names the deployment: a server's address, or a master's name and its Sentinels.
func (n nodeOptions) addr() string {
	switch {
	case n.failover != nil:
		return n.failover.MasterName + " via Sentinel " + strings.Join(n.failover.SentinelAddrs, ",")
	case n.server.Network == "unix":
		return "unix:" + n.server.Addr
	}
	return n.server.Addr
}

// label names the deployment for output: addr, then its database and TLS if any.
func (n nodeOptions) label() string {
	db, tls := 0, false
	if n.failover != nil {
		db, tls = n.failover.DB, n.failover.TLSConfig != nil
	} else {
		db, tls = n.server.DB, n.server.TLSConfig != nil
	}
	var extra []string
	if db != 0 {
		extra = append(extra, "db "+strconv.Itoa(db))
	}
	if tls {
		extra = append(extra, "TLS")
	}
	if len(extra) == 0 {
		return n.addr()
	}
	return n.addr() + " (" + strings.Join(extra, ", ") + ")"
}

// client returns a new go-redis client of the deployment: a failover client for a
// master found through Sentinel.
func (n nodeOptions) client() *redis.Client {
	if n.failover != nil {
		opts := *n.failover
		return redis.NewFailoverClient(&opts)
	}
	opts := *n.server
	return redis.NewClient(&opts)
}
