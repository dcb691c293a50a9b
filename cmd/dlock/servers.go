package main

import (
	"errors"
	"fmt"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// defaultServer is used when neither --redis nor DLOCK_REDIS names a server.
const defaultServer = "redis://127.0.0.1:6379"

// servers is what --redis, DLOCK_REDIS and --cluster describe: one deployment, the
// independent nodes of a Redlock quorum, or one Redis Cluster. It holds credentials: print
// only describe(), never the URLs or the options.
type servers struct {
	urls    []string              // as given, for worker processes (through the environment)
	cluster *redis.ClusterOptions // --cluster: one Cluster, seeded by every URL's addresses
	nodes   []*redis.Options      // otherwise: one server, or the nodes of a quorum
}

// splitServerList splits a comma-separated DLOCK_REDIS value; empty entries are dropped.
// A comma inside a password must be percent-encoded (%2C).
func splitServerList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// parseServers parses server URLs. The URLs' passwords are given to red first, and every
// error it returns has been scrubbed by red: none contains a password.
func parseServers(urls []string, cluster bool, red *redactor) (*servers, error) {
	for _, u := range urls {
		red.addURL(u)
	}
	s, err := parseServersRaw(urls, cluster)
	if err != nil {
		return nil, fmt.Errorf("%s", red.String(err.Error()))
	}
	return s, nil
}

func parseServersRaw(urls []string, cluster bool) (*servers, error) {
	if len(urls) == 0 {
		return nil, fmt.Errorf("no Redis server given: use --redis URL or DLOCK_REDIS")
	}
	s := &servers{urls: slices.Clone(urls)}
	if cluster {
		return s, s.parseCluster()
	}
	seen := map[string]int{}
	for i, raw := range urls {
		opts, err := parseOneURL(raw)
		if err != nil {
			return nil, err
		}
		key := opts.Network + " " + opts.Addr
		if j, dup := seen[key]; dup {
			return nil, fmt.Errorf("servers %d and %d are both %s: a quorum needs distinct, independent servers", j+1, i+1, opts.Addr)
		}
		seen[key] = i
		s.nodes = append(s.nodes, opts)
	}
	return s, nil
}

// urlForm is the shape every URL error message shows.
const urlForm = "redis://[user:password@]host[:port][/db] (rediss:// for TLS)"

// parseOneURL parses a standalone server's URL; its errors never quote the URL, but they
// may quote parts of it (net/url does): the caller scrubs them.
func parseOneURL(raw string) (*redis.Options, error) {
	if err := checkScheme(raw, "redis", "rediss", "unix"); err != nil {
		return nil, err
	}
	opts, err := redis.ParseURL(raw)
	if err != nil {
		return nil, badURL(raw, err)
	}
	return opts, nil
}

func checkScheme(raw string, allowed ...string) error {
	scheme, _, _, _, _ := splitURL(raw)
	scheme = strings.TrimSuffix(scheme, "://")
	if scheme == "" {
		return fmt.Errorf("bad server URL %s: no scheme; want %s", redactedURL(raw), urlForm)
	}
	if !slices.Contains(allowed, strings.ToLower(scheme)) {
		return fmt.Errorf("bad server URL %s: scheme %q is not one of %s; want %s", redactedURL(raw), scheme, strings.Join(allowed, ", "), urlForm)
	}
	return nil
}

// badURL explains a URL that go-redis or net/url refused. Their messages quote parts of
// the URL, which may be parts of a password that could not be told apart from the rest
// (a '/' or '?' in an unencoded password): only the kind of problem is kept.
func badURL(raw string, err error) error {
	msg := err.Error()
	var ue *url.Error
	if errors.As(err, &ue) {
		msg = ue.Err.Error()
	}
	msg = strings.TrimPrefix(strings.TrimPrefix(msg, "redis: "), "net/url: ")
	msg = quoted.ReplaceAllString(msg, "")
	if i := strings.Index(msg, ": "); i >= 0 {
		msg = msg[:i]
	}
	msg = strings.Join(strings.Fields(msg), " ")
	hint := ""
	switch {
	case strings.Contains(msg, "escape"), strings.Contains(msg, "userinfo"):
		hint = " (percent-encode special characters in the user and password: @ as %40, / as %2F, % as %25, : in the user as %3A)"
	case strings.Contains(msg, "option"):
		hint = " (see the query options of go-redis ParseURL)"
	}
	return fmt.Errorf("bad server URL %s: %s%s; want %s", redactedURL(raw), msg, hint, urlForm)
}

// quoted matches a Go-quoted string in an error message.
var quoted = regexp.MustCompile(`"(?:[^"\\]|\\.)*"`)

// validScheme matches a URL scheme as RFC 3986 defines it.
var validScheme = regexp.MustCompile(`^[A-Za-z][A-Za-z0-9+.\-]*$`)

// splitURL cuts raw into "scheme://" (empty unless the scheme is valid), the user, the
// password and what follows the last '@'. The password is what lies between the first ':'
// of the userinfo and the last '@': what net/url takes as the password, and more when the
// URL is malformed, so that a password is never shown even in part.
func splitURL(raw string) (scheme, user, password string, hasPassword bool, rest string) {
	rest = raw
	if s, r, ok := strings.Cut(raw, "://"); ok && validScheme.MatchString(s) {
		scheme, rest = s+"://", r
	}
	at := strings.LastIndexByte(rest, '@')
	if at < 0 {
		return scheme, "", "", false, rest
	}
	user, password, hasPassword = strings.Cut(rest[:at], ":")
	return scheme, user, password, hasPassword, rest[at+1:]
}

// redactedURL shows raw quoted, with its password masked.
func redactedURL(raw string) string {
	scheme, user, _, hasPassword, rest := splitURL(raw)
	switch {
	case hasPassword:
		return strconv.Quote(scheme + user + ":xxxxx@" + rest)
	case strings.Contains(raw, "@"):
		return strconv.Quote(scheme + user + "@" + rest)
	}
	return strconv.Quote(raw)
}

// parseCluster reads every URL as a seed of one Cluster: they must agree on the scheme and
// the credentials, and their addresses (with any ?addr= parameters) are merged.
func (s *servers) parseCluster() error {
	for i, raw := range s.urls {
		if err := checkScheme(raw, "redis", "rediss"); err != nil {
			return err
		}
		opts, err := redis.ParseClusterURL(raw)
		if err != nil {
			return badURL(raw, err)
		}
		if i == 0 {
			s.cluster = opts
			continue
		}
		first := s.cluster
		if opts.Username != first.Username || opts.Password != first.Password || (opts.TLSConfig == nil) != (first.TLSConfig == nil) {
			return fmt.Errorf("with --cluster every URL is a seed of the same Cluster: URL %d differs from the first in its user, password or scheme; give one URL, or URLs with the same credentials", i+1)
		}
		for _, a := range opts.Addrs {
			if !slices.Contains(first.Addrs, a) {
				first.Addrs = append(first.Addrs, a)
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
	for i, o := range s.nodes {
		names[i] = nodeLabel(o)
	}
	if len(names) == 1 {
		return names[0]
	}
	return fmt.Sprintf("a quorum of %d servers: %s", len(names), strings.Join(names, ", "))
}

// nodeLabel names one standalone server: its address, then its database and TLS if any.
func nodeLabel(o *redis.Options) string {
	name := o.Addr
	if o.Network == "unix" {
		name = "unix:" + o.Addr
	}
	var extra []string
	if o.DB != 0 {
		extra = append(extra, "db "+strconv.Itoa(o.DB))
	}
	if o.TLSConfig != nil {
		extra = append(extra, "TLS")
	}
	if len(extra) > 0 {
		name += " (" + strings.Join(extra, ", ") + ")"
	}
	return name
}
