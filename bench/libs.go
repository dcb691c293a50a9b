package main

import (
	"bytes"
	"context"
	crand "crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"net"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/bsm/redislock"
	"github.com/go-redsync/redsync/v4"
	redsyncredis "github.com/go-redsync/redsync/v4/redis"
	"github.com/go-redsync/redsync/v4/redis/goredis/v9"
	"github.com/redis/go-redis/v9"
	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidislock"

	"github.com/seed51c676c8/dlock"
)

// Library identifiers, as used in flags, JSON and tables.
const (
	libDlock     = "dlock"
	libDlockFair = "dlock-fair"
	// libDlockNoOwner is a variant: dlock's Mutex with WithOwner(""), no owner key and
	// plain tokens, beside which the default's owner key is measured.
	libDlockNoOwner = "dlock-noowner"
	libRedsync      = "redsync"
	libRedislock    = "redislock"
	libRueidislock  = "rueidislock"
	libSetNX        = "setnx"
)

// retryDelay is the retry interval of every library that polls.
const retryDelay = time.Millisecond

// libInfo says what a library can do.
type libInfo struct {
	ID        string
	Label     string // column heading
	Module    string // module path, for versions
	Peer      bool   // a peer (not dlock)
	Fair      bool   // grants in request order
	Quorum    bool   // Redlock over independent servers
	AutoRenew bool   // extends held leases by itself
	Config    string // how it is configured here
}

var libraries = []libInfo{
	{ID: libDlock, Label: "dlock Mutex", Module: "github.com/seed51c676c8/dlock", Quorum: true, AutoRenew: true,
		Config: "dlock.New(go-redis client, ContextTimeoutEnabled) / dlock.NewQuorum(5 such clients); Mutex with TTL(ttl), otherwise the zero configuration (waits on pub/sub, no polling)"},
	{ID: libDlockFair, Label: "dlock FairMutex", Module: "github.com/seed51c676c8/dlock", Fair: true, AutoRenew: true,
		Config: "dlock.New(go-redis client, ContextTimeoutEnabled); FairMutex with TTL(ttl)"},
	{ID: libRedsync, Label: "redsync", Module: "github.com/go-redsync/redsync/v4", Peer: true, Quorum: true,
		Config: "redsync.New(goredis.NewPool(client)...) with 1 or 5 pools; NewMutex with WithExpiry(ttl), WithRetryDelay(1ms), WithTries(MaxInt32) (ctx bounds the wait)"},
	{ID: libRedislock, Label: "bsm/redislock", Module: "github.com/bsm/redislock", Peer: true,
		Config: "redislock.New(go-redis client); Obtain(ctx, key, ttl, &Options{RetryStrategy: LinearBackoff(1ms)})"},
	{ID: libRueidislock, Label: "rueidislock", Module: "github.com/redis/rueidis", Peer: true, AutoRenew: true,
		Config: "rueidislock.NewLocker with KeyMajority 1 and NoLoopTracking (its README's advice for one Redis >= 7.0.5), KeyValidity ttl, other options default (waits on client-side-caching invalidations; ExtendInterval = KeyValidity/2)"},
	{ID: libSetNX, Label: "SET NX floor", Module: "github.com/redis/go-redis/v9", Peer: true,
		Config: "go-redis: SET key token NX PX ttl, retried every 1ms; Unlock: EVALSHA compare-and-delete"},
}

// variants are dlock configured otherwise, to measure what one option costs beside the
// default. They run only when --libs names them and have no column in the generated
// report (its columns are the libraries above): read their figures from --json.
var variants = []libInfo{
	{ID: libDlockNoOwner, Label: "dlock Mutex, no owner", Module: "github.com/seed51c676c8/dlock", Quorum: true, AutoRenew: true,
		Config: "as dlock Mutex, with WithOwner(\"\"): no owner key, plain tokens"},
}

// allLibs returns the libraries, then the variants.
func allLibs() []libInfo { return append(slices.Clip(libraries), variants...) }

func isVariant(id string) bool {
	for _, l := range variants {
		if l.ID == id {
			return true
		}
	}
	return false
}

func libByID(id string) (libInfo, bool) {
	for _, l := range allLibs() {
		if l.ID == id {
			return l, true
		}
	}
	return libInfo{}, false
}

// locker is one handle on one lock name, used by one goroutine at a time.
type locker interface {
	Lock(ctx context.Context) error
	Unlock(ctx context.Context) error
	// Held reports whether the lease taken by the last Lock is still believed held (for
	// libraries without auto-renewal, whether its TTL has not run out).
	Held() bool
}

// session is one library's client in one process, over one or more Redis servers.
type session interface {
	Locker(name string) locker
	Close()
}

// counters counts what a session sends: client calls (go-redis: one per command or
// pipeline, via a hook; rueidis: one per Do/DoMulti; dlock: round trips on its sockets),
// commands, and writes on its sockets.
type counters struct {
	calls, cmds, writes atomic.Int64
}

func (c *counters) reset() {
	c.calls.Store(0)
	c.cmds.Store(0)
	c.writes.Store(0)
}

// openOpts configures a session.
type openOpts struct {
	Addrs []string      // one server, or the quorum's nodes
	TTL   time.Duration // lease length
	Count *counters     // nil: no counting
}

func open(id string, o openOpts) (session, error) {
	if len(o.Addrs) == 0 {
		return nil, errors.New("no server address")
	}
	switch id {
	case libDlock, libDlockFair, libDlockNoOwner:
		return openDlock(id, o)
	case libRedsync:
		rdbs := goRedisClients(o)
		pools := make([]redsyncredis.Pool, len(rdbs))
		for i, r := range rdbs {
			pools[i] = goredis.NewPool(r)
		}
		return &redsyncSession{rs: redsync.New(pools...), rdbs: rdbs, ttl: o.TTL}, nil
	case libRedislock, libSetNX:
		if len(o.Addrs) > 1 {
			return nil, fmt.Errorf("%s has no quorum mode", id)
		}
		rdbs := goRedisClients(o)
		if id == libRedislock {
			return &redislockSession{c: redislock.New(rdbs[0]), rdb: rdbs[0], ttl: o.TTL}, nil
		}
		return &setnxSession{rdb: rdbs[0], ttl: o.TTL}, nil
	case libRueidislock:
		if len(o.Addrs) > 1 {
			return nil, fmt.Errorf("%s has no quorum mode over independent servers", id)
		}
		copt := rueidis.ClientOption{InitAddress: o.Addrs}
		lopt := rueidislock.LockerOption{
			ClientOption:   copt,
			KeyMajority:    1,
			NoLoopTracking: true,
			KeyValidity:    o.TTL,
		}
		if cnt := o.Count; cnt != nil {
			lopt.ClientOption.DialCtxFn = func(ctx context.Context, dst string, d *net.Dialer, _ *tls.Config) (net.Conn, error) {
				conn, err := d.DialContext(ctx, "tcp", dst)
				if err != nil {
					return nil, err
				}
				return &countingConn{Conn: conn, c: cnt}, nil
			}
			lopt.ClientBuilder = func(opt rueidis.ClientOption) (rueidis.Client, error) {
				cl, err := rueidis.NewClient(opt)
				if err != nil {
					return nil, err
				}
				return &countingRueidis{Client: cl, c: cnt}, nil
			}
		}
		l, err := rueidislock.NewLocker(lopt)
		if err != nil {
			return nil, err
		}
		return &rueidisSession{l: l}, nil
	}
	return nil, fmt.Errorf("unknown library %q", id)
}

// openDlock opens a session of dlock or one of its variants.
func openDlock(id string, o openOpts) (session, error) {
	rdbs := dlockClients(o)
	var opts []dlock.Option
	if id == libDlockNoOwner {
		opts = append(opts, dlock.WithOwner(""))
	}
	if len(rdbs) == 1 {
		return &dlockSession{c: dlock.New(rdbs[0], opts...), rdbs: rdbs, fair: id == libDlockFair, ttl: o.TTL}, nil
	}
	nodes := make([]redis.UniversalClient, len(rdbs))
	for i, r := range rdbs {
		nodes[i] = r
	}
	c, err := dlock.NewQuorum(nodes, opts...)
	if err != nil {
		closeAll(rdbs)
		return nil, err
	}
	return &dlockSession{c: c, rdbs: rdbs, fair: id == libDlockFair, ttl: o.TTL}, nil
}

func goRedisClients(o openOpts) []*redis.Client {
	rdbs := make([]*redis.Client, len(o.Addrs))
	for i, a := range o.Addrs {
		rdbs[i] = redis.NewClient(&redis.Options{Addr: a})
		if o.Count != nil {
			rdbs[i].AddHook(countHook{o.Count})
		}
	}
	return rdbs
}

// dlockClients returns go-redis clients for dlock. Counting wraps Options.Dialer, so that it
// sees every connection dlock's traffic takes, pub/sub included, as it did when dlock had
// connections of its own.
func dlockClients(o openOpts) []*redis.Client {
	rdbs := make([]*redis.Client, len(o.Addrs))
	for i, a := range o.Addrs {
		// ContextTimeoutEnabled ends a round trip's socket I/O at its deadline, which lets
		// a caller that finds its lane idle send its own call (batch.Batcher.TryRun).
		opt := &redis.Options{Addr: a, ContextTimeoutEnabled: true}
		if cnt := o.Count; cnt != nil {
			opt.DialTimeout = 5 * time.Second // go-redis' default, which NewDialer reads
			dial := redis.NewDialer(opt)      // go-redis' own: TCP keep-alive, TLS if configured
			opt.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
				conn, err := dial(ctx, network, addr)
				if err != nil {
					return nil, err
				}
				return &wireConn{Conn: conn, c: cnt}, nil
			}
		}
		rdbs[i] = redis.NewClient(opt)
	}
	return rdbs
}

func closeAll(rdbs []*redis.Client) {
	for _, r := range rdbs {
		_ = r.Close()
	}
}

// countHook counts go-redis commands, round trips and socket writes.
type countHook struct{ c *counters }

func (h countHook) DialHook(next redis.DialHook) redis.DialHook {
	return func(ctx context.Context, network, addr string) (net.Conn, error) {
		conn, err := next(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &countingConn{Conn: conn, c: h.c}, nil
	}
}

func (h countHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.c.calls.Add(1)
		h.c.cmds.Add(1)
		return next(ctx, cmd)
	}
}

func (h countHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		h.c.calls.Add(1)
		h.c.cmds.Add(int64(len(cmds)))
		return next(ctx, cmds)
	}
}

type countingConn struct {
	net.Conn
	c *counters
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.c.writes.Add(1)
	return c.Conn.Write(p)
}

// wireConn counts what goes over one connection: socket writes, commands (the RESP arrays
// written) and round trips, a round trip being a run of writes followed by a read (however
// many writes and reads: several writes in flight before the first reply are one).
type wireConn struct {
	net.Conn
	c     *counters
	wrote atomic.Bool // written since the last read
	mu    sync.Mutex  // for scan: writes may come from several goroutines
	scan  respScanner
}

func (w *wireConn) Write(p []byte) (int, error) {
	w.c.writes.Add(1)
	w.mu.Lock()
	w.c.cmds.Add(w.scan.commands(p))
	w.mu.Unlock()
	w.wrote.Store(true) // before the write: its reply may come back at once
	return w.Conn.Write(p)
}

func (w *wireConn) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	if n > 0 && w.wrote.Swap(false) {
		w.c.calls.Add(1)
	}
	return n, err
}

// respScanner counts the commands in a stream of RESP commands (arrays of bulk strings),
// cut anywhere into writes, without allocating once warm.
type respScanner struct {
	line  []byte // a header line cut by the end of a write
	elems int64  // bulk strings still to come in the current command
	skip  int64  // bytes of bulk data (and CRLF) still to come
}

func (s *respScanner) commands(p []byte) (n int64) {
	for len(p) > 0 {
		if s.skip > 0 {
			k := min(s.skip, int64(len(p)))
			s.skip -= k
			p = p[k:]
			continue
		}
		i := bytes.IndexByte(p, '\n')
		if i < 0 {
			s.line = append(s.line, p...)
			return n
		}
		line := p[:i]
		p = p[i+1:]
		if len(s.line) > 0 {
			s.line = append(s.line, line...)
			line = s.line
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) > 0 {
			num := int64(0)
			for _, d := range line[1:] {
				if d >= '0' && d <= '9' {
					num = num*10 + int64(d-'0')
				}
			}
			switch {
			case line[0] == '*' && s.elems == 0:
				n++
				s.elems = num
			case line[0] == '$':
				s.elems--
				s.skip = num + 2
			}
		}
		s.line = s.line[:0]
	}
	return n
}

// countingRueidis counts rueidis calls. rueidis pipelines concurrent calls on one
// connection by itself: its socket writes are the round trips.
type countingRueidis struct {
	rueidis.Client
	c *counters
}

func (r *countingRueidis) Do(ctx context.Context, cmd rueidis.Completed) rueidis.RedisResult {
	r.c.calls.Add(1)
	r.c.cmds.Add(1)
	return r.Client.Do(ctx, cmd)
}

func (r *countingRueidis) DoMulti(ctx context.Context, multi ...rueidis.Completed) []rueidis.RedisResult {
	r.c.calls.Add(1)
	r.c.cmds.Add(int64(len(multi)))
	return r.Client.DoMulti(ctx, multi...)
}

// dlock

type dlockSession struct {
	c    *dlock.Client
	rdbs []*redis.Client
	fair bool
	ttl  time.Duration
}

func (s *dlockSession) Locker(name string) locker {
	if s.fair {
		return &dlockLocker{lock: s.c.FairMutex(name, dlock.TTL(s.ttl)).Lock}
	}
	return &dlockLocker{lock: s.c.Mutex(name, dlock.TTL(s.ttl)).Lock}
}

func (s *dlockSession) Close() {
	_ = s.c.Close()
	closeAll(s.rdbs)
}

type dlockLocker struct {
	lock  func(context.Context) (*dlock.Lease, error)
	lease *dlock.Lease
}

func (l *dlockLocker) Lock(ctx context.Context) error {
	lease, err := l.lock(ctx)
	l.lease = lease
	return err
}

func (l *dlockLocker) Unlock(ctx context.Context) error { return l.lease.Unlock(ctx) }
func (l *dlockLocker) Held() bool                       { return l.lease != nil && l.lease.Err() == nil }

// redsync

type redsyncSession struct {
	rs   *redsync.Redsync
	rdbs []*redis.Client
	ttl  time.Duration
}

func (s *redsyncSession) Locker(name string) locker {
	return &redsyncLocker{m: s.rs.NewMutex(name,
		redsync.WithExpiry(s.ttl),
		redsync.WithRetryDelay(retryDelay),
		redsync.WithTries(math.MaxInt32))}
}

func (s *redsyncSession) Close() { closeAll(s.rdbs) }

type redsyncLocker struct{ m *redsync.Mutex }

func (l *redsyncLocker) Lock(ctx context.Context) error { return l.m.LockContext(ctx) }

func (l *redsyncLocker) Unlock(ctx context.Context) error {
	ok, err := l.m.UnlockContext(ctx)
	if err == nil && !ok {
		err = errors.New("redsync: unlock: not held")
	}
	return err
}

func (l *redsyncLocker) Held() bool { return time.Now().Before(l.m.Until()) }

// bsm/redislock

type redislockSession struct {
	c   *redislock.Client
	rdb *redis.Client
	ttl time.Duration
}

func (s *redislockSession) Locker(name string) locker {
	return &redislockLocker{s: s, key: name, opt: &redislock.Options{RetryStrategy: redislock.LinearBackoff(retryDelay)}}
}

func (s *redislockSession) Close() { _ = s.rdb.Close() }

type redislockLocker struct {
	s     *redislockSession
	key   string
	opt   *redislock.Options
	lock  *redislock.Lock
	until time.Time
}

func (l *redislockLocker) Lock(ctx context.Context) error {
	start := time.Now()
	lock, err := l.s.c.Obtain(ctx, l.key, l.s.ttl, l.opt)
	l.lock, l.until = lock, start.Add(l.s.ttl)
	return err
}

func (l *redislockLocker) Unlock(ctx context.Context) error { return l.lock.Release(ctx) }
func (l *redislockLocker) Held() bool                       { return time.Now().Before(l.until) }

// rueidislock

type rueidisSession struct{ l rueidislock.Locker }

func (s *rueidisSession) Locker(name string) locker { return &rueidisLocker{l: s.l, name: name} }
func (s *rueidisSession) Close()                    { s.l.Close() }

type rueidisLocker struct {
	l      rueidislock.Locker
	name   string
	ctx    context.Context
	cancel context.CancelFunc
}

// Lock: the lock lives as long as ctx, which must outlive the hold.
func (l *rueidisLocker) Lock(ctx context.Context) error {
	lctx, cancel, err := l.l.WithContext(ctx, l.name)
	l.ctx, l.cancel = lctx, cancel
	return err
}

// Unlock: cancel releases the key and waits for the reply.
func (l *rueidisLocker) Unlock(context.Context) error {
	l.cancel()
	return nil
}

func (l *rueidisLocker) Held() bool { return l.ctx != nil && l.ctx.Err() == nil }

// The floor: SET NX PX, polled every retryDelay, released by compare-and-delete.

var compareAndDelete = redis.NewScript(`if redis.call("get", KEYS[1]) == ARGV[1] then return redis.call("del", KEYS[1]) else return 0 end`)

type setnxSession struct {
	rdb *redis.Client
	ttl time.Duration
}

func (s *setnxSession) Locker(name string) locker { return &setnxLocker{s: s, key: name} }
func (s *setnxSession) Close()                    { _ = s.rdb.Close() }

type setnxLocker struct {
	s     *setnxSession
	key   string
	token string
	until time.Time
	timer *time.Timer
}

func (l *setnxLocker) Lock(ctx context.Context) error {
	var b [16]byte
	_, _ = crand.Read(b[:])
	l.token = hex.EncodeToString(b[:])
	for {
		start := time.Now()
		ok, err := l.s.rdb.SetNX(ctx, l.key, l.token, l.s.ttl).Result()
		if err != nil {
			return err
		}
		if ok {
			l.until = start.Add(l.s.ttl)
			return nil
		}
		if l.timer == nil {
			l.timer = time.NewTimer(retryDelay)
		} else {
			l.timer.Reset(retryDelay)
		}
		select {
		case <-ctx.Done():
			l.timer.Stop()
			return ctx.Err()
		case <-l.timer.C:
		}
	}
}

func (l *setnxLocker) Unlock(ctx context.Context) error {
	n, err := compareAndDelete.Run(ctx, l.s.rdb, []string{l.key}, l.token).Int64()
	if err == nil && n == 0 {
		err = errors.New("setnx: unlock: not held")
	}
	return err
}

func (l *setnxLocker) Held() bool { return time.Now().Before(l.until) }
