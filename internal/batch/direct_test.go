package batch

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// The direct transport, against real redis-server processes (and, for replies no Redis
// sends, a fake server on a loopback socket).

// dialer wraps a net.Dialer for Options.Dialer: it counts dials and, while gate is set,
// holds each dial until the gate is closed (or the dial's ctx ends), which keeps the writer
// busy while a test queues calls behind it.
type dialer struct {
	dials atomic.Int64
	mu    sync.Mutex
	gate  chan struct{}
}

func (d *dialer) hold() {
	d.mu.Lock()
	d.gate = make(chan struct{})
	d.mu.Unlock()
}

func (d *dialer) release() {
	d.mu.Lock()
	if d.gate != nil {
		close(d.gate)
		d.gate = nil
	}
	d.mu.Unlock()
}

func (d *dialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.dials.Add(1)
	d.mu.Lock()
	gate := d.gate
	d.mu.Unlock()
	if gate != nil {
		select {
		case <-gate:
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	var nd net.Dialer
	return nd.DialContext(ctx, network, addr)
}

// newDirectFor starts a batcher with the direct transport on a go-redis client of srv with
// the options that opts sets, dialling with the returned dialer. It also returns another
// client of srv, for looking at what the calls did.
func newDirectFor(t *testing.T, srv *redistest.Server, opts func(*redis.Options)) (*Batcher, *dialer, *redis.Client) {
	t.Helper()
	o := srv.Options()
	dl := &dialer{}
	o.Dialer = dl.dial
	if opts != nil {
		opts(o)
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	b := New(rdb, 4)
	if b.d == nil {
		t.Fatal("New chose go-redis pipelines for a *redis.Client")
	}
	t.Cleanup(b.Stop)
	t.Cleanup(dl.release)
	return b, dl, srv.Client(t)
}

// call sends one call and waits for its answer.
func call(t *testing.T, b *Batcher, s *redis.Script, keys []string, args ...any) *Call {
	t.Helper()
	done := make(chan *Call, 1)
	if !b.Send(&Call{Script: s, Keys: keys, Args: args, Done: done}) {
		t.Fatal("Send = false")
	}
	return wait(t, done, 20*time.Second)
}

// commandStats returns INFO commandstats as calls per command ("evalsha", "script|load").
func commandStats(t *testing.T, rdb *redis.Client) map[string]int64 {
	t.Helper()
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	stats := map[string]int64{}
	for _, line := range strings.Split(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimPrefix(strings.TrimSpace(line), "cmdstat_"), ":calls=")
		if !ok {
			continue
		}
		n, _ := strconv.ParseInt(rest[:strings.IndexByte(rest, ',')], 10, 64)
		stats[name] = n
	}
	return stats
}

func TestDirectReplies(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b, dl, rdb := newDirectFor(t, srv, nil)
	rdb.RPush(ctx, "list", "x")
	for _, tt := range []struct {
		name, src string
		keys      []string
		val       int64
		err       func(error) bool
		errText   string // the error says this
	}{
		{name: "integer", src: `return 42`, val: 42},
		{name: "negative", src: `return -1500`, val: -1500},
		{name: "large", src: `return 9007199254740993`, val: 9007199254740992}, // a Lua double
		{name: "float truncated", src: `return 3.7`, val: 3},
		{name: "false is nil", src: `return false`, err: func(err error) bool { return err == redis.Nil }},
		{name: "missing key is nil", src: `return redis.call('GET', 'no such key')`, err: func(err error) bool { return errors.Is(err, redis.Nil) }},
		{name: "error reply", src: `return redis.error_reply('MYERR it went wrong')`,
			err: func(err error) bool { return redis.HasErrorPrefix(err, "MYERR") }, errText: "MYERR it went wrong"},
		{name: "WRONGTYPE", src: `return redis.call('INCR', KEYS[1])`, keys: []string{"list"},
			err: func(err error) bool { return redis.HasErrorPrefix(err, "WRONGTYPE") }},
		{name: "runtime error", src: `return nosuchfunction()`, // HasErrorPrefix drops "ERR "
			err: func(err error) bool { return strings.HasPrefix(err.Error(), "ERR ") }, errText: "nosuchfunction"},
		{name: "status", src: `return redis.status_reply('FINE')`, errText: `unexpected status reply "FINE"`},
		{name: "bulk", src: `return 'text'`, errText: `unexpected bulk string reply "text"`},
		{name: "long bulk", src: `return string.rep('a', 10000)`, errText: `bulk string reply of 10000 bytes`},
		{name: "array", src: `return {1, 'two', {3, {4, 'five'}}, false}`, errText: `unexpected array reply of 4 elements`},
		{name: "empty array", src: `return {}`, errText: `unexpected array reply of 0 elements`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			c := call(t, b, redis.NewScript(tt.src), tt.keys)
			switch {
			case tt.err != nil:
				if !tt.err(c.Err) {
					t.Fatalf("Err = %v", c.Err)
				}
				var re redis.Error
				if c.Err != redis.Nil && !errors.As(c.Err, &re) {
					t.Fatalf("Err %v (%T) is not a redis.Error", c.Err, c.Err)
				}
			case tt.errText == "" && (c.Err != nil || c.Val != tt.val):
				t.Fatalf("reply %d, %v; want %d", c.Val, c.Err, tt.val)
			}
			if tt.errText != "" && (c.Err == nil || !strings.Contains(c.Err.Error(), tt.errText)) {
				t.Fatalf("Err = %v, want it to say %q", c.Err, tt.errText)
			}
			// The connection is still in step: the next call gets its own reply.
			if c := call(t, b, echo, nil, 99); c.Err != nil || c.Val != 99 {
				t.Fatalf("the next call: %d, %v", c.Val, c.Err)
			}
			if n := dl.dials.Load(); n != 1 {
				t.Fatalf("%d dials: the reply cost the connection", n)
			}
		})
	}
	if n := dl.dials.Load(); n != 1 {
		t.Fatalf("%d dials: an unexpected reply cost the connection", n)
	}
	var re redis.Error
	if c := call(t, b, incr, []string{"list"}, 1); !errors.As(c.Err, &re) || !redis.HasErrorPrefix(c.Err, "WRONGTYPE") {
		t.Fatalf("WRONGTYPE: %v", c.Err)
	}
}

// TestDirectArguments: every argument type go-redis accepts arrives as go-redis would write
// it; one that cannot be encoded fails its call alone, without sending it.
func TestDirectArguments(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b, _, _ := newDirectFor(t, srv, nil)
	argv := redis.NewScript(`return redis.call('RPUSH', KEYS[1], unpack(ARGV))`)
	args := []any{"s", []byte("b"), 1, int8(-8), int16(16), int32(-32), int64(64), uint(1), uint8(8), uint16(16),
		uint32(32), uint64(1 << 63), 1.5, float32(0.25), true, false, nil, 3 * time.Millisecond, net.IPv4(127, 0, 0, 1).To4()}
	want := []string{"s", "b", "1", "-8", "16", "-32", "64", "1", "8", "16", "32", "9223372036854775808", "1.5", "0.25", "1", "0", "", "3000000", "\x7f\x00\x00\x01"}
	if c := call(t, b, argv, []string{"args"}, args...); c.Err != nil || c.Val != int64(len(want)) {
		t.Fatalf("RPUSH: %d, %v", c.Val, c.Err)
	}
	rdb := srv.Client(t)
	vals, err := rdb.LRange(ctx, "args", 0, -1).Result()
	if err != nil {
		t.Fatal(err)
	}
	if fmt.Sprint(vals) != fmt.Sprint(want) {
		t.Fatalf("arguments arrived as %q, want %q", vals, want)
	}

	done := make(chan *Call, 3)
	b.Send(&Call{Script: incr, Keys: []string{"before"}, Args: []any{1}, Done: done})
	b.Send(&Call{Script: incr, Keys: []string{"bad"}, Args: []any{struct{}{}}, Done: done})
	b.Send(&Call{Script: incr, Keys: []string{"after"}, Args: []any{2}, Done: done})
	for range 3 {
		c := wait(t, done, 10*time.Second)
		switch c.Keys[0] {
		case "bad":
			if c.Err == nil || !strings.Contains(c.Err.Error(), "struct {}") {
				t.Fatalf("a struct argument: %v", c.Err)
			}
		default:
			if c.Err != nil {
				t.Fatalf("%s: %v", c.Keys[0], c.Err)
			}
		}
	}
	if rdb.Exists(ctx, "bad").Val() != 0 {
		t.Fatal("the call with a bad argument ran")
	}
}

// TestDirectKeyOrder: calls for one key run in the order they were sent, with many keys
// sent to at once.
func TestDirectKeyOrder(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b, _, rdb := newDirectFor(t, srv, nil)
	push := redis.NewScript(`return redis.call('RPUSH', KEYS[1], ARGV[1])`)
	const keys, perKey = 16, 300
	var wg sync.WaitGroup
	errs := make(chan error, keys)
	for k := range keys {
		wg.Go(func() {
			key := "order:" + strconv.Itoa(k)
			done := make(chan *Call, perKey)
			calls := make([]*Call, perKey)
			for i := range perKey { // without waiting for replies
				calls[i] = &Call{Script: push, Keys: []string{key}, Args: []any{i}, Done: done}
				if !b.Send(calls[i]) {
					errs <- errors.New("Send = false")
					return
				}
			}
			for range perKey {
				<-done
			}
			for i, c := range calls {
				if c.Err != nil || c.Val != int64(i+1) {
					errs <- fmt.Errorf("%s call %d: %d, %v (run out of order?)", key, i, c.Val, c.Err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	for k := range keys {
		vals := rdb.LRange(ctx, "order:"+strconv.Itoa(k), 0, -1).Val()
		for i, v := range vals {
			if v != strconv.Itoa(i) {
				t.Fatalf("order:%d[%d] = %s", k, i, v)
			}
		}
	}
	t.Logf("%d calls in %d writes", b.d.written.Load(), b.d.flushes.Load())
}

// TestDirectCallsShareWrites: calls queued while the writer is busy (here: dialling) go out
// together, in writes of at most maxBatch calls; under concurrency, writes carry several
// calls.
func TestDirectCallsShareWrites(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b, dl, _ := newDirectFor(t, srv, nil)
	dl.hold()
	const n = 1 + 2*maxBatch + 87
	done := make(chan *Call, n)
	b.Send(&Call{Script: echo, Args: []any{0}, Node: 0, Done: done})
	for dl.dials.Load() == 0 { // the writer took the first call and is dialling
		time.Sleep(time.Millisecond)
	}
	var wg sync.WaitGroup
	for i := 1; i < n; i++ {
		wg.Go(func() { b.Send(&Call{Script: echo, Args: []any{i}, Node: i, Done: done}) })
	}
	wg.Wait()
	dl.release()
	for range n {
		if c := wait(t, done, 20*time.Second); c.Err != nil || c.Val != int64(c.Node) {
			t.Fatalf("call %d: %d, %v", c.Node, c.Val, c.Err)
		}
	}
	if f, w := b.d.flushes.Load(), b.d.written.Load(); f != 4 || w != n {
		t.Fatalf("%d calls in %d writes; want %d in 4: the first, then the rest %d at a time", w, f, n, maxBatch)
	}

	// Goroutines that each wait for their reply before the next call: replies arrive
	// together, and the calls that follow them share writes.
	const goroutines, rounds = 64, 50
	f0, w0 := b.d.flushes.Load(), b.d.written.Load()
	for g := range goroutines {
		wg.Go(func() {
			done := make(chan *Call, 1)
			c := &Call{Script: echo, Args: []any{g}}
			for range rounds {
				c.Done = done
				b.Send(c)
				if c := <-done; c.Err != nil {
					t.Error(c.Err)
					return
				}
			}
		})
	}
	wg.Wait()
	f, w := b.d.flushes.Load()-f0, b.d.written.Load()-w0
	t.Logf("%d calls from %d goroutines in %d writes (%.1f calls per write)", w, goroutines, f, float64(w)/float64(f))
	if w != goroutines*rounds || f >= w {
		t.Fatalf("%d calls in %d writes: no write carried more than one call", w, f)
	}
}

// TestDirectSendAll: SendAll goes out in one write, whatever its size.
func TestDirectSendAll(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b, _, _ := newDirectFor(t, srv, nil)
	call(t, b, echo, nil, 1) // connected, scripts loaded
	const n = 5 * maxBatch
	done := make(chan *Call, n)
	calls := make([]*Call, n)
	for i := range calls {
		calls[i] = &Call{Script: incr, Keys: []string{"all"}, Args: []any{1}, Node: i, Done: done}
	}
	f0 := b.d.flushes.Load()
	b.SendAll(calls)
	for range n {
		if c := wait(t, done, 20*time.Second); c.Err != nil || c.Val != int64(c.Node+1) {
			t.Fatalf("call %d: %d, %v", c.Node, c.Val, c.Err)
		}
	}
	if f := b.d.flushes.Load() - f0; f != 1 {
		t.Fatalf("SendAll of %d calls took %d writes", n, f)
	}
	b.Stop()
	done = make(chan *Call, 2)
	b.SendAll([]*Call{{Script: echo, Args: []any{1}, Done: done}, {Script: echo, Args: []any{2}, Done: done}})
	for range 2 {
		if c := wait(t, done, time.Second); !errors.Is(c.Err, ErrStopped) {
			t.Fatalf("SendAll after Stop: %v", c.Err)
		}
	}
}

func TestDirectAuth(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithPassword("s3cret"))
	admin := srv.Client(t)
	if err := admin.Do(ctx, "ACL", "SETUSER", "alice", "on", ">alicepw", "~*", "&*", "+@all").Err(); err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name string
		opts func(*redis.Options)
		ok   bool
		err  string // the error starts with this
	}{
		{name: "password", ok: true},
		{name: "user", opts: func(o *redis.Options) { o.Username, o.Password = "alice", "alicepw" }, ok: true},
		{name: "CredentialsProvider", ok: true, opts: func(o *redis.Options) {
			o.Password = ""
			o.CredentialsProvider = func() (string, string) { return "alice", "alicepw" }
		}},
		{name: "CredentialsProviderContext", ok: true, opts: func(o *redis.Options) {
			o.Password = ""
			o.CredentialsProviderContext = func(context.Context) (string, string, error) { return "alice", "alicepw", nil }
		}},
		{name: "wrong password", opts: func(o *redis.Options) { o.Password = "wrong" }, err: "WRONGPASS"},
		{name: "wrong user", opts: func(o *redis.Options) { o.Username, o.Password = "bob", "s3cret" }, err: "WRONGPASS"},
		{name: "no password", opts: func(o *redis.Options) { o.Password = "" }, err: "NOAUTH"},
		{name: "credentials fail", err: "could not connect: credentials: vault sealed", opts: func(o *redis.Options) {
			o.CredentialsProviderContext = func(context.Context) (string, string, error) { return "", "", errors.New("vault sealed") }
		}},
		{name: "NOAUTH in the handshake", opts: func(o *redis.Options) { o.Password, o.DB = "", 2 }, err: "NOAUTH"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			b, _, _ := newDirectFor(t, srv, tt.opts)
			c := call(t, b, echo, nil, 5)
			if tt.ok {
				if c.Err != nil || c.Val != 5 {
					t.Fatalf("reply %d, %v", c.Val, c.Err)
				}
				return
			}
			if c.Err == nil || !strings.HasPrefix(c.Err.Error(), tt.err) {
				t.Fatalf("Err = %v, want it to start with %q", c.Err, tt.err)
			}
			if strings.HasPrefix(tt.err, "WRONGPASS") || strings.HasPrefix(tt.err, "NOAUTH") {
				if !redis.HasErrorPrefix(c.Err, tt.err) || !redis.IsAuthError(c.Err) {
					t.Fatalf("%v: not recognised as %s by go-redis' helpers", c.Err, tt.err)
				}
			}
			if strings.Contains(c.Err.Error(), "wrong") && tt.name == "wrong password" {
				t.Fatalf("the error shows the password: %v", c.Err)
			}
		})
	}
}

func TestDirectSelectAndName(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b, _, _ := newDirectFor(t, srv, func(o *redis.Options) {
		o.DB = 5
		o.ClientName = "dlock-test"
	})
	if c := call(t, b, incr, []string{"in5"}, 7); c.Err != nil || c.Val != 7 {
		t.Fatalf("reply %d, %v", c.Val, c.Err)
	}
	db0 := srv.Client(t)
	if db0.Exists(ctx, "in5").Val() != 0 {
		t.Fatal("the call ran in db 0")
	}
	o := srv.Options()
	o.DB = 5
	db5 := redis.NewClient(o)
	defer db5.Close()
	if v := db5.Get(ctx, "in5").Val(); v != "7" {
		t.Fatalf("db 5 has %q", v)
	}
	if list := db0.ClientList(ctx).Val(); !strings.Contains(list, "name=dlock-test ") {
		t.Fatalf("no client named dlock-test:\n%s", list)
	}

	b2, _, _ := newDirectFor(t, srv, func(o *redis.Options) { o.DB = 99 })
	if c := call(t, b2, echo, nil, 1); c.Err == nil || !strings.Contains(c.Err.Error(), "SELECT 99") {
		t.Fatalf("SELECT of a db out of range: %v", c.Err)
	}
}

// TestDirectRestart: after a restart, the next call dials again and loads the scripts
// before its EVALSHA: no NOSCRIPT, no EVAL. While the server is down, calls fail at once.
func TestDirectRestart(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b, dl, _ := newDirectFor(t, srv, func(o *redis.Options) { o.DialerRetries = 1 })
	if c := call(t, b, incr, []string{"k"}, 1); c.Err != nil {
		t.Fatal(c.Err)
	}
	srv.Kill(t)
	c := call(t, b, incr, []string{"k"}, 1)
	if c.Err == nil {
		t.Fatal("a call to a dead server succeeded")
	}
	t.Logf("while down: %v", c.Err)
	c2 := call(t, b, incr, []string{"k"}, 1) // within the backoff, or a new failed dial
	if c2.Err == nil {
		t.Fatal("a call to a dead server succeeded")
	}
	srv.Restart(t)
	rdb := srv.Client(t)
	var last *Call
	for range 200 { // the dial backoff passes
		if last = call(t, b, incr, []string{"k"}, 3); last.Err == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	if last.Err != nil || last.Val != 3 {
		t.Fatalf("after the restart: %d, %v", last.Val, last.Err)
	}
	stats := commandStats(t, rdb)
	if stats["eval"] != 0 || stats["script|load"] != 1 || stats["evalsha"] != 1 {
		t.Fatalf("after the restart the server ran %v; want one SCRIPT LOAD and one EVALSHA", stats)
	}
	if n := dl.dials.Load(); n < 2 {
		t.Fatalf("%d dials", n)
	}
}

// TestDirectScriptFlush: after SCRIPT FLUSH on a live server, calls come back NOSCRIPT and
// are sent again with EVAL; each runs exactly once, and later calls load the scripts again.
func TestDirectScriptFlush(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b, _, rdb := newDirectFor(t, srv, nil)
	if c := call(t, b, incr, []string{"warm"}, 1); c.Err != nil {
		t.Fatal(c.Err)
	}
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const n = 200
	done := make(chan *Call, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			s := incr
			if i%3 == 0 {
				s = echo
			}
			b.Send(&Call{Script: s, Keys: []string{"f" + strconv.Itoa(i%7)}, Args: []any{i}, Node: i, Done: done})
		})
	}
	wg.Wait()
	for range n {
		if c := wait(t, done, 20*time.Second); c.Err != nil {
			t.Fatalf("call %d: %v", c.Node, c.Err)
		}
	}
	sums := map[string]int64{}
	for i := range n {
		if i%3 != 0 {
			sums["f"+strconv.Itoa(i%7)] += int64(i)
		}
	}
	for k, want := range sums {
		if got, _ := rdb.Get(ctx, k).Int64(); got != want {
			t.Fatalf("%s = %d, want %d: a call ran twice or not at all", k, got, want)
		}
	}
	stats := commandStats(t, rdb)
	if stats["eval"] == 0 {
		t.Fatalf("no EVAL after SCRIPT FLUSH: %v", stats)
	}
	loads := stats["script|load"]
	if c := call(t, b, incr, []string{"later"}, 1); c.Err != nil {
		t.Fatal(c.Err)
	}
	if stats := commandStats(t, rdb); stats["script|load"] != loads+1 {
		t.Logf("SCRIPT LOADs %d then %d", loads, stats["script|load"])
	}
	t.Logf("after SCRIPT FLUSH: %v", commandStats(t, rdb))
}

// TestDirectScriptLoadRefused: a user allowed EVALSHA and EVAL but not SCRIPT gets its
// calls run all the same (EVAL loads the script), without asking again on the connection.
func TestDirectScriptLoadRefused(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	if err := admin.Do(ctx, "ACL", "SETUSER", "noscript", "on", ">pw", "~*", "+evalsha", "+eval", "+incrby").Err(); err != nil {
		t.Fatal(err)
	}
	b, _, _ := newDirectFor(t, srv, func(o *redis.Options) { o.Username, o.Password = "noscript", "pw" })
	for i := range 5 {
		if c := call(t, b, incr, []string{"n"}, 1); c.Err != nil || c.Val != int64(i+1) {
			t.Fatalf("call %d: %d, %v", i, c.Val, c.Err)
		}
	}
	if stats := commandStats(t, admin); stats["eval"] != 1 {
		t.Fatalf("server ran %v; want one EVAL, then EVALSHA", stats)
	}
}

// TestDirectHungServer: a call written to a hung server is answered once ReadTimeout has
// passed since it was written, and the connection is replaced; calls that could not be
// written by their deadline are answered without being sent.
func TestDirectHungServer(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	const readTimeout = 300 * time.Millisecond
	b, dl, _ := newDirectFor(t, srv, func(o *redis.Options) { o.ReadTimeout = readTimeout })
	if c := call(t, b, echo, nil, 1); c.Err != nil {
		t.Fatal(c.Err)
	}
	srv.Pause(t)
	defer srv.Resume(t)
	done := make(chan *Call, 1)
	start := time.Now()
	b.Send(&Call{Script: incr, Keys: []string{"hung"}, Args: []any{1}, Deadline: start.Add(50 * time.Millisecond), Done: done})
	select {
	case c := <-done:
		t.Fatalf("answered before the read timeout: %v", c.Err)
	case <-time.After(readTimeout / 2):
		// The caller gives up at its own deadline; the call is in flight all the same.
	}
	c := wait(t, done, 20*time.Second)
	if e := time.Since(start); c.Err == nil || !strings.Contains(c.Err.Error(), "ReadTimeout") || e < readTimeout {
		t.Fatalf("after %v: %v; want the read timeout's error, not before %v", e, c.Err, readTimeout)
	}
	t.Log(c.Err)
	srv.Resume(t)
	if c := call(t, b, echo, nil, 2); c.Err != nil || c.Val != 2 {
		t.Fatalf("after resuming: %d, %v", c.Val, c.Err)
	}
	if n := dl.dials.Load(); n != 2 {
		t.Fatalf("%d dials; want a new connection after the timeout", n)
	}
}

// TestDirectExpiredInQueue: calls queued behind a slow dial whose deadline passes meanwhile
// are answered with the expiry error and never sent.
func TestDirectExpiredInQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b, dl, rdb := newDirectFor(t, srv, nil)
	dl.hold()
	expired, live := make(chan *Call, 1), make(chan *Call, 1)
	b.Send(&Call{Script: incr, Keys: []string{"expired"}, Args: []any{1}, Deadline: time.Now().Add(50 * time.Millisecond), Done: expired})
	b.Send(&Call{Script: incr, Keys: []string{"live"}, Args: []any{1}, Deadline: time.Now().Add(time.Hour), Done: live})
	time.Sleep(100 * time.Millisecond)
	dl.release()
	if c := wait(t, expired, 20*time.Second); !IsExpired(c.Err) {
		t.Fatalf("expired call: %d, %v", c.Val, c.Err)
	}
	if c := wait(t, live, 20*time.Second); c.Err != nil || c.Val != 1 {
		t.Fatalf("live call: %d, %v", c.Val, c.Err)
	}
	if rdb.Exists(ctx, "expired").Val() != 0 {
		t.Fatal("the expired call ran")
	}
}

// TestDirectStop: Stop answers the calls in flight on a hung server after the read timeout,
// fails the calls it could not send with ErrStopped, refuses calls after it, and returns
// once its goroutines are gone (goleak checks that).
func TestDirectStop(t *testing.T) {
	t.Parallel()
	for _, connected := range []bool{true, false} {
		t.Run(fmt.Sprintf("connected=%v", connected), func(t *testing.T) {
			t.Parallel()
			srv := redistest.Start(t)
			b, dl, rdb := newDirectFor(t, srv, func(o *redis.Options) { o.ReadTimeout = 500 * time.Millisecond })
			var inFlight chan *Call
			if connected {
				if c := call(t, b, echo, nil, 1); c.Err != nil {
					t.Fatal(c.Err)
				}
				srv.Pause(t)
				defer srv.Resume(t)
				inFlight = make(chan *Call, 1)
				b.Send(&Call{Script: incr, Keys: []string{"inflight"}, Args: []any{1}, Done: inFlight})
			} else {
				dl.hold() // the writer waits in the dial: the calls stay queued
			}
			queued := make(chan *Call, 3)
			for i := range 3 {
				if !b.Send(&Call{Script: incr, Keys: []string{"queued"}, Args: []any{i}, Done: queued}) {
					t.Fatal("Send = false before Stop")
				}
			}
			stopped := make(chan struct{})
			go func() { b.Stop(); close(stopped) }()
			select {
			case <-stopped:
			case <-time.After(20 * time.Second):
				t.Fatal("Stop did not return")
			}
			if connected {
				// Written before Stop, the calls are answered by the read timeout.
				if c := wait(t, inFlight, time.Second); c.Err == nil {
					t.Fatalf("call to a paused server succeeded: %d", c.Val)
				}
				for range 3 {
					if c := wait(t, queued, time.Second); c.Err == nil {
						t.Fatalf("queued call to a paused server succeeded: %d", c.Val)
					}
				}
			} else {
				for range 3 {
					if c := wait(t, queued, time.Second); !errors.Is(c.Err, ErrStopped) {
						t.Fatalf("queued call: %d, %v; want ErrStopped", c.Val, c.Err)
					}
				}
			}
			if b.Send(&Call{Script: incr, Done: make(chan *Call, 1)}) || b.TrySend(&Call{Script: incr, Done: make(chan *Call, 1)}) {
				t.Fatal("Send after Stop = true")
			}
			b.Stop() // idempotent
			srv.Resume(t)
			if !connected && rdb.Exists(ctx, "queued").Val() != 0 {
				t.Fatal("a call failed with ErrStopped ran in Redis")
			}
		})
	}
}

// TestDirectStopWritesQueued: a call queued just before Stop, while connected, still goes
// out: a Client's Close relies on it for the releases it sends last.
func TestDirectStopWritesQueued(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for range 20 {
		b, _, _ := newDirectFor(t, srv, nil)
		if c := call(t, b, echo, nil, 1); c.Err != nil {
			t.Fatal(c.Err)
		}
		done := make(chan *Call, 1)
		b.TrySend(&Call{Script: incr, Keys: []string{"last"}, Args: []any{1}, Done: done})
		b.Stop()
		if c := wait(t, done, time.Second); c.Err != nil {
			t.Fatalf("the call queued before Stop: %v", c.Err)
		}
	}
	if v := srv.Client(t).Get(ctx, "last").Val(); v != "20" {
		t.Fatalf("last = %s, want 20", v)
	}
}

// TestDirectFullQueue: with maxPending calls waiting on a hung server, TrySend refuses and
// Send waits no longer than the call's deadline.
func TestDirectFullQueue(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	b, _, rdb := newDirectFor(t, srv, func(o *redis.Options) { o.ReadTimeout = 20 * time.Second })
	if c := call(t, b, echo, nil, 1); c.Err != nil {
		t.Fatal(c.Err)
	}
	srv.Pause(t)
	defer srv.Resume(t)
	backlog := make(chan *Call, maxPending+1)
	queued := 0
	for b.TrySend(&Call{Script: incr, Keys: []string{"backlog"}, Args: []any{1}, Done: backlog}) {
		if queued++; queued > maxPending {
			t.Fatalf("TrySend accepted %d calls; the bound is %d", queued, maxPending)
		}
	}
	if queued != maxPending {
		t.Fatalf("TrySend refused after %d calls, the bound is %d", queued, maxPending)
	}
	done := make(chan *Call, 1)
	start := time.Now()
	deadline := start.Add(200 * time.Millisecond)
	if !b.Send(&Call{Script: incr, Keys: []string{"late"}, Args: []any{1}, Deadline: deadline, Done: done}) {
		t.Fatal("Send = false")
	}
	if time.Now().Before(deadline) {
		t.Fatal("Send returned before the deadline")
	}
	if c := wait(t, done, time.Second); !IsExpired(c.Err) {
		t.Fatalf("call that could not be queued: %v", c.Err)
	}
	srv.Resume(t)
	for range queued {
		if c := wait(t, backlog, 20*time.Second); c.Err != nil {
			t.Fatal(c.Err)
		}
	}
	if v := rdb.Get(ctx, "backlog").Val(); v != strconv.Itoa(queued) {
		t.Fatalf("backlog = %s, want %d", v, queued)
	}
	if rdb.Exists(ctx, "late").Val() != 0 {
		t.Fatal("the call that could not be queued ran")
	}
}

// TestDirectChoice: which clients get the direct transport.
func TestDirectChoice(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, tt := range []struct {
		name   string
		opts   func(*redis.Options)
		direct bool
	}{
		{"plain", nil, true},
		{"OnConnect", func(o *redis.Options) { o.OnConnect = func(context.Context, *redis.Conn) error { return nil } }, false},
		{"Limiter", func(o *redis.Options) { o.Limiter = nopLimiter{} }, false},
	} {
		o := srv.Options()
		if tt.opts != nil {
			tt.opts(o)
		}
		rdb := redis.NewClient(o)
		b := New(rdb, 2)
		if (b.d != nil) != tt.direct {
			t.Errorf("%s: direct = %v", tt.name, b.d != nil)
		}
		if c := call(t, b, echo, nil, 3); c.Err != nil || c.Val != 3 {
			t.Errorf("%s: %d, %v", tt.name, c.Val, c.Err)
		}
		b.Stop()
		_ = rdb.Close()
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr}})
	defer ring.Close()
	b := New(ring, 2)
	defer b.Stop()
	if b.d != nil {
		t.Error("a Ring got the direct transport")
	}
	nilClient := New(nil, 0)
	done := make(chan *Call, 1)
	nilClient.Send(&Call{Script: echo, Done: done})
	nilClient.Stop()
	if c := wait(t, done, time.Second); !errors.Is(c.Err, ErrStopped) {
		t.Errorf("New(nil, 0): %v", c.Err)
	}
}

type nopLimiter struct{}

func (nopLimiter) Allow() error       { return nil }
func (nopLimiter) ReportResult(error) {}

// fakeServer is a TCP server on loopback that answers each command with what reply says:
// the replies no Redis sends, to check that the reader survives them.
type fakeServer struct {
	ln    net.Listener
	reply func(n int, cmd []string) string // n counts commands over all connections
	wg    sync.WaitGroup
	mu    sync.Mutex
	conns []net.Conn
	n     atomic.Int64
}

func startFake(t *testing.T, reply func(n int, cmd []string) string) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeServer{ln: ln, reply: reply}
	f.wg.Add(1)
	go f.accept()
	t.Cleanup(f.close)
	return f
}

func (f *fakeServer) accept() {
	defer f.wg.Done()
	for {
		c, err := f.ln.Accept()
		if err != nil {
			return
		}
		f.mu.Lock()
		f.conns = append(f.conns, c)
		f.mu.Unlock()
		f.wg.Add(1)
		go f.serve(c)
	}
}

func (f *fakeServer) serve(c net.Conn) {
	defer f.wg.Done()
	defer c.Close()
	rr := respReader{br: bufio.NewReader(c)}
	for {
		cmd, err := readCommand(&rr)
		if err != nil {
			return
		}
		if cmd[0] == "SCRIPT" {
			if _, err := c.Write([]byte("$40\r\n0123456789012345678901234567890123456789\r\n")); err != nil {
				return
			}
			continue
		}
		out := f.reply(int(f.n.Add(1)), cmd)
		if out == "CLOSE" {
			return
		}
		if _, err := c.Write([]byte(out)); err != nil {
			return
		}
	}
}

func (f *fakeServer) close() {
	_ = f.ln.Close()
	f.mu.Lock()
	for _, c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// readCommand reads one command: an array of bulk strings.
func readCommand(rr *respReader) ([]string, error) {
	line, err := rr.line()
	if err != nil {
		return nil, err
	}
	n, ok := parseInt(line[1:])
	if line[0] != '*' || !ok {
		return nil, fmt.Errorf("not a command: %q", line)
	}
	cmd := make([]string, n)
	for i := range cmd {
		line, err := rr.line()
		if err != nil {
			return nil, err
		}
		m, _ := parseInt(line[1:])
		b := make([]byte, m+2)
		if _, err := io.ReadFull(rr.br, b); err != nil {
			return nil, err
		}
		cmd[i] = string(b[:m])
	}
	return cmd, nil
}

func TestDirectMalformedReplies(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name  string
		reply string // to the first EVALSHA; the second gets ":2\r\n"
		err   string // the first call's error says this; "" for none
		val   int64
		redia bool // the connection is replaced
	}{
		{name: "garbage", reply: "hello\r\n", err: "unknown reply type", redia: true},
		{name: "bad integer", reply: ":12a\r\n", err: "bad integer reply", redia: true},
		{name: "no CRLF", reply: ":12\n", err: "bad line", redia: true},
		{name: "empty line", reply: "\r\n", err: "bad line", redia: true},
		{name: "huge bulk", reply: "$999999999999\r\n", err: "bad bulk string length", redia: true},
		{name: "negative array", reply: "*-5\r\n", err: "bad array length", redia: true},
		{name: "bulk without CRLF", reply: "$3\r\nabcXY:1\r\n", err: "not followed by CRLF", redia: true},
		{name: "RESP3 double", reply: ",1.5\r\n", err: "unknown reply type", redia: true},
		{name: "closed mid-reply", reply: "CLOSE", err: "connection closed by the server", redia: true},
		{name: "extra reply", reply: ":1\r\n+EXTRA\r\n", val: 1, redia: true},
		{name: "deep array", reply: strings.Repeat("*1\r\n", 100000) + ":1\r\n", err: "array reply of 1 elements"},
		{name: "nil array", reply: "*-1\r\n", err: "redis: nil"},
		{name: "long error", reply: "-ERR " + strings.Repeat("x", 30000) + "\r\n", err: "ERR xxx"},
		{name: "too long a line", reply: "-ERR " + strings.Repeat("x", 100000) + "\r\n", err: "line longer than", redia: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := startFake(t, func(n int, cmd []string) string {
				if n == 1 {
					return tt.reply
				}
				return ":2\r\n"
			})
			dl := &dialer{}
			rdb := redis.NewClient(&redis.Options{Addr: f.ln.Addr().String(), Dialer: dl.dial, ReadTimeout: 5 * time.Second})
			defer rdb.Close()
			b := New(rdb, 1)
			defer b.Stop()
			c := call(t, b, echo, nil, 1)
			if tt.err == "" && (c.Err != nil || c.Val != tt.val) {
				t.Fatalf("first call: %d, %v", c.Val, c.Err)
			}
			if tt.err != "" && (c.Err == nil || !strings.Contains(c.Err.Error(), tt.err)) {
				t.Fatalf("first call: %d, %v; want an error about %q", c.Val, c.Err, tt.err)
			}
			if tt.name == "extra reply" {
				// The reader notices the reply with no call waiting for it, which closes the
				// connection; wait for that before the next call.
				deadline := time.Now().Add(10 * time.Second)
				for !b.d.current().dead.Load() && time.Now().Before(deadline) {
					time.Sleep(time.Millisecond)
				}
			}
			if c := call(t, b, echo, nil, 2); c.Err != nil || c.Val != 2 {
				t.Fatalf("second call: %d, %v", c.Val, c.Err)
			}
			if want := map[bool]int64{false: 1, true: 2}[tt.redia]; dl.dials.Load() != want {
				t.Fatalf("%d dials, want %d", dl.dials.Load(), want)
			}
		})
	}
}

// TestDirectReadOnlyRetires: a READONLY reply (a master demoted by a failover) makes the
// next call use a new connection, dialled with the Dialer, which for a Sentinel client
// asks the sentinels for the new master.
func TestDirectReadOnlyRetires(t *testing.T) {
	t.Parallel()
	servers := redistest.StartNodes(t, 2)
	primary, replica := servers[0], servers[1]
	b, dl, rdb := newDirectFor(t, replica, nil)
	host, port, _ := net.SplitHostPort(primary.Addr)
	if err := rdb.Do(ctx, "REPLICAOF", host, port).Err(); err != nil {
		t.Fatal(err)
	}
	c := call(t, b, incr, []string{"ro"}, 1)
	if !redis.IsReadOnlyError(c.Err) {
		t.Fatalf("a write on a replica: %v", c.Err)
	}
	if err := rdb.Do(ctx, "REPLICAOF", "NO", "ONE").Err(); err != nil {
		t.Fatal(err)
	}
	if c := call(t, b, incr, []string{"ro"}, 1); c.Err != nil || c.Val != 1 {
		t.Fatalf("after the promotion: %d, %v", c.Val, c.Err)
	}
	if n := dl.dials.Load(); n != 2 {
		t.Fatalf("%d dials; want a new connection after READONLY", n)
	}
}

// TestDirectHandshakeHung: a server that accepts the connection but does not answer AUTH
// fails the calls after ReadTimeout, and Stop cuts such a handshake short.
func TestDirectHandshakeHung(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t, redistest.WithPassword("pw"))
	srv.Pause(t)
	defer srv.Resume(t)
	b, _, _ := newDirectFor(t, srv, func(o *redis.Options) { o.ReadTimeout = 200 * time.Millisecond })
	c := call(t, b, echo, nil, 1)
	if c.Err == nil || !strings.Contains(c.Err.Error(), "AUTH") || !strings.Contains(c.Err.Error(), "ReadTimeout") {
		t.Fatalf("call behind a hung handshake: %v", c.Err)
	}
	t.Log(c.Err)

	b2, _, _ := newDirectFor(t, srv, func(o *redis.Options) { o.ReadTimeout = time.Minute })
	done := make(chan *Call, 1)
	b2.Send(&Call{Script: echo, Args: []any{1}, Done: done})
	time.Sleep(50 * time.Millisecond) // in the handshake
	stopped := make(chan struct{})
	go func() { b2.Stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop waited for the handshake's read timeout")
	}
	if c := wait(t, done, time.Second); !errors.Is(c.Err, ErrStopped) {
		t.Fatalf("call behind the handshake Stop cut short: %v", c.Err)
	}
}
