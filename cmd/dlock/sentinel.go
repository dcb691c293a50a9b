package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// A Sentinel URL names a master by the name its Sentinels know it by, and the Sentinels
// to ask: redis+sentinel://[user:password@]host[:port][,host[:port]...]/master[/db]. As in
// a redis:// URL, the user and password are the master's (an ACL user); the Sentinels'
// own credentials, when they require some, are the parameters sentinel-user and
// sentinel-password. rediss+sentinel:// uses TLS to the Sentinels and the master alike.

const (
	sentinelScheme    = "redis+sentinel"
	sentinelTLSScheme = "rediss+sentinel"
	sentinelForm      = "redis+sentinel://[user:password@]host[:port][,host[:port]...]/master[/db] (rediss+sentinel:// for TLS)"
	// sentinelPort is where a Sentinel listens unless the URL says otherwise.
	sentinelPort = "26379"

	paramSentinelUser     = "sentinel-user"
	paramSentinelPassword = "sentinel-password"
)

// sentinelParams are the query parameters dlock reads from a Sentinel URL.
var sentinelParams = []string{paramSentinelUser, paramSentinelPassword}

// cutHosts returns raw with only its first Sentinel as its host, so that net/url can
// parse it, and every Sentinel as host:port.
func cutHosts(raw string) (string, []string, error) {
	start, end := afterUserinfo(raw, "/?#")
	var hosts []string
	for _, h := range strings.Split(raw[start:end], ",") {
		if _, _, err := net.SplitHostPort(h); err != nil {
			h = net.JoinHostPort(strings.Trim(h, "[]"), sentinelPort)
		}
		host, port, _ := net.SplitHostPort(h)
		if n, err := strconv.Atoi(port); host == "" || err != nil || n < 1 || n > 65535 {
			return "", nil, fmt.Errorf("bad server URL %s: the Sentinel %q is not host[:port]; want %s", redactedURL(raw), h, sentinelForm)
		}
		hosts = append(hosts, h)
	}
	return raw[:start] + hosts[0] + raw[end:], hosts, nil
}

// failoverOptions returns the options of a failover client for a Sentinel URL.
func (p *parsedURL) failoverOptions() (*redis.FailoverOptions, error) {
	q := p.u.Query()
	for _, name := range []string{"master_name", "addr", "username", "password"} {
		if q.Has(name) {
			return nil, fmt.Errorf("bad server URL %s: %s= has no place in a Sentinel URL, which gives the master's user and password before the @, the Sentinels as its hosts and the master's name as its path; want %s", redactedURL(p.raw), name, sentinelForm)
		}
	}
	path := strings.Split(strings.Trim(p.u.Path, "/"), "/")
	if path[0] == "" || len(path) > 2 {
		return nil, fmt.Errorf("bad server URL %s: the path must be the master's name, and then the database number if any; want %s", redactedURL(p.raw), sentinelForm)
	}
	q.Set("master_name", path[0])
	if len(path) == 2 {
		q.Set("db", path[1])
	}
	for _, h := range p.hosts[1:] {
		q.Add("addr", h)
	}
	u := *p.u
	u.Scheme, u.Host, u.Path, u.RawPath, u.RawQuery = strings.TrimSuffix(p.scheme, "+sentinel"), p.hosts[0], "", "", q.Encode()
	o, err := redis.ParseFailoverURL(u.String())
	if err != nil {
		return nil, badURL(p.raw, err)
	}
	// go-redis takes the userinfo for the Sentinels' credentials; here it is the master's.
	o.Username, o.Password = o.SentinelUsername, o.SentinelPassword
	o.SentinelUsername, o.SentinelPassword = p.params[paramSentinelUser], p.params[paramSentinelPassword]
	if o.TLSConfig != nil {
		// go-redis would check every certificate against the first Sentinel's host; with no
		// name, each connection checks the address it dials: a Sentinel's, or the master's
		// as the Sentinels give it. tls-server-name still names one name for all.
		o.TLSConfig.ServerName = ""
	}
	if o.TLSConfig, err = p.tlsConfig(o.TLSConfig); err != nil {
		return nil, err
	}
	return o, nil
}

// askSentinels asks every Sentinel of o once for the master's address, and returns nil if
// one gave it, else what each said, as go-redis reports it (diagnose knows the form).
func askSentinels(ctx context.Context, o *redis.FailoverOptions) error {
	errs := make([]error, len(o.SentinelAddrs))
	var wg sync.WaitGroup
	for i, addr := range o.SentinelAddrs {
		wg.Go(func() {
			c := redis.NewSentinelClient(&redis.Options{
				Addr: addr, Username: o.SentinelUsername, Password: o.SentinelPassword, TLSConfig: o.TLSConfig,
				MaxRetries: -1, DialerRetries: 1, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
			})
			defer c.Close()
			errs[i] = c.GetMasterAddrByName(ctx, o.MasterName).Err()
		})
	}
	wg.Wait()
	if slices.Contains(errs, nil) {
		return nil
	}
	return fmt.Errorf("%s%w", sentinelsFailed, errors.Join(errs...))
}
