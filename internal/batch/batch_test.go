package batch

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

// incr adds ARGV[1] to KEYS[1] and returns the result: a script with a visible effect.
var incr = redis.NewScript(`return redis.call('INCRBY', KEYS[1], ARGV[1])`)

// echo returns ARGV[1]: a script without effect.
var echo = redis.NewScript(`return tonumber(ARGV[1])`)

// counter counts round trips: single commands and pipelines, leaving out those that set
// up a new connection (HELLO, CLIENT SETINFO).
type counter struct {
	singles, pipelines, pipelined atomic.Int64
	started                       chan string // if not nil, gets the name of each command as it starts
}

func (c *counter) DialHook(next redis.DialHook) redis.DialHook { return next }

func (c *counter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if setup(cmd) {
			return next(ctx, cmd)
		}
		c.singles.Add(1)
		if c.started != nil {
			select {
			case c.started <- cmd.Name():
			default:
			}
		}
		return next(ctx, cmd)
	}
}

func (c *counter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if len(cmds) > 0 && setup(cmds[0]) {
			return next(ctx, cmds)
		}
		c.pipelines.Add(1)
		c.pipelined.Add(int64(len(cmds)))
		if c.started != nil {
			select {
			case c.started <- "pipeline":
			default:
			}
		}
		return next(ctx, cmds)
	}
}

func setup(cmd redis.Cmder) bool { return cmd.Name() == "hello" || cmd.Name() == "client" }

func (c *counter) roundTrips() int64 { return c.singles.Load() + c.pipelines.Load() }

// start starts a server and returns a client with a counting hook; the scripts are loaded
// unless noLoad.
func start(t *testing.T, opts func(*redis.Options)) (*redistest.Server, *redis.Client, *counter) {
	t.Helper()
	srv := redistest.Start(t)
	o := srv.Options()
	if opts != nil {
		opts(o)
	}
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	for _, s := range []*redis.Script{incr, echo} {
		if err := s.Load(ctx, rdb).Err(); err != nil {
			t.Fatal(err)
		}
	}
	cnt := &counter{}
	rdb.AddHook(cnt)
	return srv, rdb, cnt
}

// goredis returns a batcher on the go-redis pipeline path (lanes), whatever the client.
func goredis(rdb redis.UniversalClient, inFlight int) *Batcher {
	return &Batcher{l: newLanes(rdb, inFlight)}
}

// autoPipeline returns a batcher on go-redis' AutoPipeliner.
func autoPipeline(rdb redis.UniversalClient, inFlight int) *Batcher {
	return &Batcher{a: newAuto(rdb, inFlight)}
}

// transports are the ways a Batcher sends, for the tests that hold for all.
var transports = []struct {
	name string
	new  func(rdb *redis.Client, inFlight int) *Batcher
}{
	{"auto", func(rdb *redis.Client, inFlight int) *Batcher { return autoPipeline(rdb, inFlight) }},
	{"goredis", func(rdb *redis.Client, inFlight int) *Batcher { return goredis(rdb, inFlight) }},
}

func wait(t *testing.T, done <-chan *Call, within time.Duration) *Call {
	t.Helper()
	select {
	case c := <-done:
		return c
	case <-time.After(within):
		t.Fatalf("no reply within %v", within)
		return nil
	}
}

func TestSingleCall(t *testing.T) {
	t.Parallel()
	_, rdb, cnt := start(t, nil)
	b := goredis(rdb, 2)
	defer b.Stop()

	done := make(chan *Call, 1)
	c := &Call{Script: incr, Keys: []string{"k"}, Args: []any{5}, Node: 3, Done: done}
	if !b.Send(c) {
		t.Fatal("Send = false")
	}
	got := wait(t, done, 10*time.Second)
	if got != c || c.Err != nil || c.Val != 5 || c.Node != 3 {
		t.Fatalf("reply %+v, want the same call with Val 5, Node 3", got)
	}
	if cnt.pipelines.Load() != 0 || cnt.singles.Load() != 1 {
		t.Fatalf("%d single commands, %d pipelines; want one EVALSHA", cnt.singles.Load(), cnt.pipelines.Load())
	}

	// Errors of the script come back on the call.
	rdb.RPush(ctx, "list", "x")
	c = &Call{Script: incr, Keys: []string{"list"}, Args: []any{1}, Done: done}
	b.Send(c)
	if got := wait(t, done, 10*time.Second); !redis.HasErrorPrefix(got.Err, "WRONGTYPE") {
		t.Fatalf("error = %v, want WRONGTYPE", got.Err)
	}
}

// TestConcurrentCallsSharePipelines sends 200 calls from 200 goroutines at once; they go
// out in far fewer than 200 round trips, and each gets its own reply.
func TestConcurrentCallsSharePipelines(t *testing.T) {
	t.Parallel()
	_, rdb, cnt := start(t, nil)
	b := goredis(rdb, 2)
	defer b.Stop()

	const n = 200
	start := make(chan struct{})
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			done := make(chan *Call, 1)
			<-start
			c := &Call{Script: echo, Args: []any{i}, Done: done}
			if !b.Send(c) {
				errs <- errors.New("Send = false")
				return
			}
			select {
			case c := <-done:
				if c.Err != nil || c.Val != int64(i) {
					errs <- fmt.Errorf("call %d: %d, %v", i, c.Val, c.Err)
				}
			case <-time.After(20 * time.Second):
				errs <- fmt.Errorf("call %d: no reply", i)
			}
		})
	}
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	rt := cnt.roundTrips()
	t.Logf("%d calls in %d round trips (%d pipelines of %d calls, %d single)",
		n, rt, cnt.pipelines.Load(), cnt.pipelined.Load(), cnt.singles.Load())
	if rt >= n/2 {
		t.Fatalf("%d calls took %d round trips; want far fewer", n, rt)
	}
	if got := cnt.pipelined.Load() + cnt.singles.Load(); got != n {
		t.Fatalf("%d commands sent for %d calls", got, n)
	}
}

// TestMaxBatch checks that a burst is cut into pipelines of at most maxBatch calls.
func TestMaxBatch(t *testing.T) {
	t.Parallel()
	srv, rdb, cnt := start(t, nil)
	var largest atomic.Int64
	rdb.AddHook(&sizeHook{largest: &largest})
	b := goredis(rdb, 1)
	defer b.Stop()

	// Hold the worker in a round trip while the burst queues up behind it.
	first := make(chan *Call, 1)
	srv.Pause(t)
	b.Send(&Call{Script: echo, Args: []any{0}, Done: first})
	const n = 3 * maxBatch
	done := make(chan *Call, n)
	time.Sleep(50 * time.Millisecond) // let the worker take the first call alone
	for i := range n {
		if !b.Send(&Call{Script: echo, Args: []any{i}, Done: done}) {
			t.Fatal("Send = false")
		}
	}
	srv.Resume(t)
	wait(t, first, 20*time.Second)
	for range n {
		if c := wait(t, done, 20*time.Second); c.Err != nil {
			t.Fatal(c.Err)
		}
	}
	if l := largest.Load(); l > maxBatch {
		t.Fatalf("a pipeline of %d calls; maxBatch is %d", l, maxBatch)
	}
	if p := cnt.pipelines.Load(); p < n/maxBatch || p > n/maxBatch+3 {
		t.Fatalf("%d pipelines for %d queued calls, want about %d", p, n, n/maxBatch)
	}
}

type sizeHook struct{ largest *atomic.Int64 }

func (h *sizeHook) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *sizeHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *sizeHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for {
			l := h.largest.Load()
			if int64(len(cmds)) <= l || h.largest.CompareAndSwap(l, int64(len(cmds))) {
				break
			}
		}
		return next(ctx, cmds)
	}
}

// TestExpiredCallsAreNotSent queues calls behind a hung round trip; those whose Deadline
// passes meanwhile are answered with an expiry error and never reach Redis.
func TestExpiredCallsAreNotSent(t *testing.T) {
	t.Parallel()
	srv, rdb, _ := start(t, nil)
	b := goredis(rdb, 1)
	defer b.Stop()

	srv.Pause(t)
	defer srv.Resume(t)
	first := make(chan *Call, 1)
	b.Send(&Call{Script: incr, Keys: []string{"first"}, Args: []any{1}, Done: first})
	time.Sleep(50 * time.Millisecond) // the worker is now stuck on "first"

	expired := make(chan *Call, 1)
	live := make(chan *Call, 1)
	b.Send(&Call{Script: incr, Keys: []string{"expired"}, Args: []any{1}, Deadline: time.Now().Add(100 * time.Millisecond), Done: expired})
	b.Send(&Call{Script: incr, Keys: []string{"live"}, Args: []any{1}, Deadline: time.Now().Add(time.Hour), Done: live})
	time.Sleep(300 * time.Millisecond)
	srv.Resume(t)

	if c := wait(t, first, 20*time.Second); c.Err != nil || c.Val != 1 {
		t.Fatalf("first call: %d, %v", c.Val, c.Err)
	}
	c := wait(t, expired, 20*time.Second)
	if !IsExpired(c.Err) {
		t.Fatalf("expired call: %d, %v; want an expiry error", c.Val, c.Err)
	}
	if c := wait(t, live, 20*time.Second); c.Err != nil || c.Val != 1 {
		t.Fatalf("live call: %d, %v", c.Val, c.Err)
	}
	if n := rdb.Exists(ctx, "expired").Val(); n != 0 {
		t.Fatal("the expired call ran in Redis")
	}

	// A call whose deadline has already passed when it is sent is not sent either.
	b.Send(&Call{Script: incr, Keys: []string{"expired"}, Args: []any{1}, Deadline: time.Now().Add(-time.Millisecond), Done: expired})
	if c := wait(t, expired, 10*time.Second); !IsExpired(c.Err) {
		t.Fatalf("call past its deadline: %v", c.Err)
	}
	if n := rdb.Exists(ctx, "expired").Val(); n != 0 {
		t.Fatal("the expired call ran in Redis")
	}
}

func TestIsExpired(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		err  error
		want bool
	}{
		{nil, false},
		{errExpired, true},
		{fmt.Errorf("node a: %w", errExpired), true},
		{ErrStopped, false},
		{context.DeadlineExceeded, false},
	} {
		if got := IsExpired(tt.err); got != tt.want {
			t.Errorf("IsExpired(%v) = %v, want %v", tt.err, got, tt.want)
		}
	}
}

// TestNoScriptRecovery flushes the script cache and runs a pipeline: every call is run, once,
// and the scripts are loaded again without one round trip per call.
func TestNoScriptRecovery(t *testing.T) {
	t.Parallel()
	_, rdb, cnt := start(t, nil)

	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	const n = 50
	done := make(chan *Call, n)
	calls := make([]*Call, n)
	for i := range calls {
		s := incr
		if i%2 == 1 {
			s = echo
		}
		calls[i] = &Call{Script: s, Keys: []string{"k" + strconv.Itoa(i%5)}, Args: []any{i}, Done: done}
	}
	before := cnt.roundTrips()
	pipeline(ctx, rdb, calls)
	rt := cnt.roundTrips() - before
	if len(done) != n {
		t.Fatalf("%d of %d calls answered", len(done), n)
	}
	sums := map[string]int64{}
	for i, c := range calls {
		if c.Err != nil {
			t.Fatalf("call %d: %v", i, c.Err)
		}
		if i%2 == 1 {
			if c.Val != int64(i) {
				t.Fatalf("echo %d = %d", i, c.Val)
			}
			continue
		}
		sums[c.Keys[0]] += int64(i)
		if c.Val != sums[c.Keys[0]] {
			t.Fatalf("call %d: INCRBY replied %d, want %d (run twice or out of order?)", i, c.Val, sums[c.Keys[0]])
		}
	}
	for k, want := range sums {
		if got, _ := rdb.Get(ctx, k).Int64(); got != want {
			t.Fatalf("%s = %d, want %d: a call ran twice or not at all", k, got, want)
		}
	}
	t.Logf("%d calls after SCRIPT FLUSH took %d round trips", n, rt)
	if rt > 6 {
		t.Fatalf("%d round trips for %d calls after SCRIPT FLUSH; want the scripts loaded once, not per call", rt, n)
	}

	// Through the batcher: concurrent calls after another flush all succeed.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	b := goredis(rdb, 2)
	defer b.Stop()
	var wg sync.WaitGroup
	replies := make(chan *Call, n)
	for i := range n {
		wg.Go(func() { b.Send(&Call{Script: echo, Args: []any{i}, Done: replies}) })
	}
	wg.Wait()
	for range n {
		if c := wait(t, replies, 20*time.Second); c.Err != nil {
			t.Fatal(c.Err)
		}
	}
}

// TestPipelineErrors: one failing call does not fail the others of its pipeline, and a
// pipeline to a dead server fails every call.
func TestPipelineErrors(t *testing.T) {
	t.Parallel()
	srv, rdb, _ := start(t, func(o *redis.Options) { o.MaxRetries = -1 })
	rdb.RPush(ctx, "list", "x")
	done := make(chan *Call, 3)
	calls := []*Call{
		{Script: incr, Keys: []string{"a"}, Args: []any{1}, Done: done},
		{Script: incr, Keys: []string{"list"}, Args: []any{1}, Done: done},
		{Script: incr, Keys: []string{"b"}, Args: []any{2}, Done: done},
	}
	pipeline(ctx, rdb, calls)
	if calls[0].Err != nil || calls[0].Val != 1 || calls[2].Err != nil || calls[2].Val != 2 {
		t.Fatalf("good calls: %+v %+v", calls[0], calls[2])
	}
	if !redis.HasErrorPrefix(calls[1].Err, "WRONGTYPE") {
		t.Fatalf("bad call: %v", calls[1].Err)
	}

	srv.Kill(t)
	done = make(chan *Call, 3)
	for _, c := range calls {
		c.Done, c.Val, c.Err = done, 0, nil
	}
	pipeline(ctx, rdb, calls)
	if len(done) != 3 {
		t.Fatalf("%d of 3 calls answered", len(done))
	}
	for _, c := range calls {
		if c.Err == nil {
			t.Fatalf("call to a dead server succeeded: %+v", c)
		}
	}
}

// TestStopSendsQueuedCalls: a call accepted before Stop is sent, even one that waits behind
// a round trip a slow server holds up when Stop comes, so that the release a Client's Close
// makes of an acquisition that landed meanwhile reaches Redis.
func TestStopSendsQueuedCalls(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			started := make(chan string, 16)
			srv, rdb, cnt := start(t, func(o *redis.Options) {
				o.MaxRetries = -1
				o.ReadTimeout = 10 * time.Second
			})
			cnt.started = started
			b := tr.new(rdb, 1)

			srv.Pause(t)
			defer srv.Resume(t)
			done := make(chan *Call, 4)
			b.Send(&Call{Script: incr, Keys: []string{"inflight"}, Args: []any{1}, Done: done})
			select {
			case <-started: // the round trip is under way, and held up
			case <-time.After(10 * time.Second):
				t.Fatal("the first call never started")
			}
			for range 3 {
				if !b.Send(&Call{Script: incr, Keys: []string{"queued"}, Args: []any{1}, Done: done}) {
					t.Fatal("Send = false before Stop")
				}
			}
			stopped := make(chan struct{})
			go func() { b.Stop(); close(stopped) }()
			waitStopping(t, b)
			srv.Resume(t)
			for range 4 {
				if c := wait(t, done, 10*time.Second); c.Err != nil || c.Val < 1 {
					t.Fatalf("a call queued before Stop: %d, %v", c.Val, c.Err)
				}
			}
			select {
			case <-stopped:
			case <-time.After(10 * time.Second):
				t.Fatal("Stop did not return")
			}
			if n, err := rdb.Get(ctx, "queued").Int(); n != 3 || err != nil {
				t.Fatalf("queued calls run: %d, %v; want 3", n, err)
			}
		})
	}
}

// waitStopping waits until Stop has begun on b: sends are refused from then on.
func waitStopping(t *testing.T, b *Batcher) {
	t.Helper()
	var stopped chan struct{}
	if b.a != nil {
		stopped = b.a.stopped
	} else {
		stopped = b.l.stopped
	}
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("Stop did not begin")
	}
}

// TestStopDrainIsBounded: a server that does not answer (paused) holds Stop up no longer
// than its round trips, which ReadTimeout ends (not the context): once a round trip has
// outlasted its deadline, the in-flight one included, nothing more is sent to it, and the
// calls still queued are answered with ErrStopped, unsent. Calls after Stop are refused.
func TestStopDrainIsBounded(t *testing.T) {
	t.Parallel()
	const readTimeout = 2 * drainTime
	for _, tc := range []struct {
		name string
		// inFlightDeadline is the deadline of the call in flight when Stop comes; zero:
		// none, so its round trip cannot overrun it and the drain sends one round trip
		// (tried), which overruns the drain's bound.
		inFlightDeadline time.Duration
		tried            int
		// within bounds Stop, from the in-flight call's start: its round trip, and the
		// drain's if it sends one. Sending after an overrun would take another readTimeout.
		within time.Duration
	}{
		{"in-flight round trip overran", 300 * time.Millisecond, 0, readTimeout + drainTime/2},
		{"drain's round trip overran", 0, maxBatch, 2*readTimeout + drainTime/2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			started := make(chan string, 16)
			srv, rdb, cnt := start(t, func(o *redis.Options) {
				o.MaxRetries = -1
				o.ReadTimeout = readTimeout
			})
			cnt.started = started
			b := goredis(rdb, 1)

			srv.Pause(t)
			defer srv.Resume(t)
			inFlight := make(chan *Call, 1)
			call := &Call{Script: incr, Keys: []string{"inflight"}, Args: []any{1}, Done: inFlight}
			if tc.inFlightDeadline > 0 {
				call.Deadline = time.Now().Add(tc.inFlightDeadline)
			}
			begun := time.Now()
			b.Send(call)
			select {
			case <-started: // the worker is in the round trip
			case <-time.After(10 * time.Second):
				t.Fatal("the first call never started")
			}
			tried := make(chan *Call, maxBatch)
			for range tc.tried {
				b.Send(&Call{Script: incr, Keys: []string{"tried"}, Args: []any{1}, Done: tried})
			}
			queued := make(chan *Call, 3)
			for i := range 3 {
				if !b.Send(&Call{Script: incr, Keys: []string{"queued"}, Args: []any{i}, Done: queued}) {
					t.Fatal("Send = false before Stop")
				}
			}
			stopped := make(chan struct{})
			go func() { b.Stop(); close(stopped) }()

			if c := wait(t, inFlight, 20*time.Second); c.Err == nil {
				t.Fatalf("call to a paused server succeeded: %d", c.Val)
			}
			select {
			case <-stopped:
			case <-time.After(20 * time.Second):
				t.Fatal("Stop did not return")
			}
			if took := time.Since(begun); took > tc.within {
				t.Errorf("Stop returned %v after the in-flight call began; want under %v (ReadTimeout %v)", took, tc.within, readTimeout)
			}
			for range tc.tried {
				if c := wait(t, tried, time.Second); c.Err == nil || errors.Is(c.Err, ErrStopped) {
					t.Fatalf("a call of the drain's round trip: %d, %v; want its timeout", c.Val, c.Err)
				}
			}
			for range 3 {
				if c := wait(t, queued, time.Second); !errors.Is(c.Err, ErrStopped) {
					t.Fatalf("queued call: %d, %v; want ErrStopped", c.Val, c.Err)
				}
			}
			if b.Send(&Call{Script: incr, Done: make(chan *Call, 1)}) {
				t.Fatal("Send after Stop = true")
			}
			b.Stop() // idempotent
			srv.Resume(t)
			if n := rdb.Exists(ctx, "queued").Val(); n != 0 {
				t.Fatal("a call failed with ErrStopped ran in Redis")
			}
		})
	}
}

// TestFullQueue: with the queue full (a hung server under load), TrySend refuses at once and
// Send waits no longer than the call's Deadline, then answers it with the expiry error.
func TestFullQueue(t *testing.T) {
	t.Parallel()
	srv, rdb, cnt := start(t, func(o *redis.Options) { o.ReadTimeout = 10 * time.Second })
	cnt.started = make(chan string, 1)
	b := goredis(rdb, 1)
	defer b.Stop()
	srv.Pause(t)
	defer srv.Resume(t)

	backlog := make(chan *Call, 2*cap(b.l.lanes[0].calls))
	queued := 0
	b.Send(&Call{Script: echo, Args: []any{0}, Done: backlog})
	<-cnt.started // the worker is stuck in its round trip
	for b.TrySend(&Call{Script: incr, Keys: []string{"backlog"}, Args: []any{1}, Done: backlog}) {
		queued++
		if queued > cap(b.l.lanes[0].calls) {
			t.Fatalf("TrySend accepted %d calls into a queue of %d", queued, cap(b.l.lanes[0].calls))
		}
	}
	if queued != cap(b.l.lanes[0].calls) {
		t.Fatalf("TrySend refused after %d calls, the queue holds %d", queued, cap(b.l.lanes[0].calls))
	}

	done := make(chan *Call, 1)
	start := time.Now()
	deadline := start.Add(200 * time.Millisecond)
	if !b.Send(&Call{Script: incr, Keys: []string{"late"}, Args: []any{1}, Deadline: deadline, Done: done}) {
		t.Fatal("Send = false")
	}
	if e := time.Since(start); time.Now().Before(deadline) || e > 5*time.Second {
		t.Fatalf("Send on a full queue returned after %v, deadline after 200ms", e)
	}
	if c := wait(t, done, time.Second); !IsExpired(c.Err) {
		t.Fatalf("call that could not be queued: %d, %v; want the expiry error", c.Val, c.Err)
	}

	srv.Resume(t)
	for range queued + 1 {
		if c := wait(t, backlog, 20*time.Second); c.Err != nil {
			t.Fatal(c.Err)
		}
	}
	if v := rdb.Get(ctx, "backlog").Val(); v != strconv.Itoa(queued) {
		t.Fatalf("backlog = %s, want %d", v, queued)
	}
	if n := rdb.Exists(ctx, "late").Val(); n != 0 {
		t.Fatal("the call that could not be queued ran")
	}
	b.Stop()
	if b.TrySend(&Call{Script: echo, Args: []any{1}, Done: done}) {
		t.Fatal("TrySend after Stop = true")
	}
}

// TestSendStopRace: every Send that reports true is answered exactly once, whatever Stop
// does at the same time.
func TestSendStopRace(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			testSendStopRace(t, tr.new)
		})
	}
}

func testSendStopRace(t *testing.T, newBatcher func(*redis.Client, int) *Batcher) {
	_, rdb, _ := start(t, nil)
	for round := range 20 {
		b := newBatcher(rdb, 2)
		const senders = 16
		replies := make(chan *Call, 4*maxBatch+senders*64)
		var accepted atomic.Int64
		var wg sync.WaitGroup
		for range senders {
			wg.Go(func() {
				for i := range 64 {
					if !b.Send(&Call{Script: echo, Args: []any{i}, Done: replies}) {
						return
					}
					accepted.Add(1)
				}
			})
		}
		time.Sleep(time.Duration(round%4) * time.Millisecond)
		b.Stop()
		wg.Wait()
		deadline := time.After(10 * time.Second)
		for got := int64(0); got < accepted.Load(); got++ {
			select {
			case c := <-replies:
				if c.Err != nil && !errors.Is(c.Err, ErrStopped) {
					t.Fatalf("round %d: %v", round, c.Err)
				}
			case <-deadline:
				t.Fatalf("round %d: %d of %d accepted calls answered", round, got, accepted.Load())
			}
		}
		select {
		case c := <-replies:
			t.Fatalf("round %d: a call answered twice or an unaccepted call answered: %+v", round, c)
		default:
		}
	}
}

// TestPausedServerDoesNotBlockCallers: a caller that stops waiting is not held up by a hung
// server, and the call is answered later all the same.
func TestPausedServerDoesNotBlockCallers(t *testing.T) {
	t.Parallel()
	for _, tr := range transports {
		t.Run(tr.name, func(t *testing.T) {
			t.Parallel()
			testPausedServerDoesNotBlockCallers(t, tr.new)
		})
	}
}

func testPausedServerDoesNotBlockCallers(t *testing.T, newBatcher func(*redis.Client, int) *Batcher) {
	srv, rdb, _ := start(t, nil)
	b := newBatcher(rdb, 2)
	defer b.Stop()

	srv.Pause(t)
	defer srv.Resume(t)
	dones := make([]chan *Call, 5)
	start := time.Now()
	for i := range dones {
		dones[i] = make(chan *Call, 1)
		b.Send(&Call{Script: echo, Args: []any{i}, Done: dones[i]})
	}
	for i, done := range dones {
		select {
		case c := <-done:
			t.Fatalf("call %d answered by a paused server: %+v", i, c)
		case <-time.After(20 * time.Millisecond):
		}
	}
	if e := time.Since(start); e > 5*time.Second {
		t.Fatalf("giving up took %v", e)
	}
	srv.Resume(t)
	for _, done := range dones {
		c := wait(t, done, 20*time.Second)
		_ = c // a reply or a timeout error, but always an answer
	}
}

// TestCluster sends calls for keys on every master of a Cluster through one batcher.
func TestCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	rdb := c.Client(t)
	b := New(rdb, 2)
	defer b.Stop()

	const n = 60
	done := make(chan *Call, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			b.Send(&Call{Script: incr, Keys: []string{fmt.Sprintf("key%d", i)}, Args: []any{i + 1}, Node: i, Done: done})
		})
	}
	wg.Wait()
	for range n {
		c := wait(t, done, 20*time.Second)
		if c.Err != nil || c.Val != int64(c.Node+1) {
			t.Fatalf("call %d: %d, %v", c.Node, c.Val, c.Err)
		}
	}

	// After SCRIPT FLUSH on every master, a pipeline spanning the masters recovers.
	if err := rdb.ScriptFlush(ctx).Err(); err != nil {
		t.Fatal(err)
	}
	calls := make([]*Call, n)
	for i := range calls {
		calls[i] = &Call{Script: incr, Keys: []string{fmt.Sprintf("key%d", i)}, Args: []any{1}, Node: i, Done: done}
	}
	pipeline(ctx, rdb, calls)
	for _, c := range calls {
		if c.Err != nil || c.Val != int64(c.Node+2) {
			t.Fatalf("call %d after SCRIPT FLUSH: %d, %v", c.Node, c.Val, c.Err)
		}
	}
}

// TestClusterFirstCallPerMaster: on a Cluster the first call of a script to each master
// goes out as EVAL, since each master has a script cache of its own. Counted once for the
// whole Cluster, a script first sent to one master went to another as EVALSHA, was
// answered NOSCRIPT there, and failed unsent when a call of its slot behind it ran.
func TestClusterFirstCallPerMaster(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartCluster(t, 3).Client(t)
	kA, kB := keysOnTwoMasters(t, rdb)
	b := New(rdb, 1)
	defer b.Stop()
	done := make(chan *Call, 3)
	b.Send(&Call{Script: echo, Keys: []string{kB}, Args: []any{1}, Done: done}) // echo known on B
	if c := wait(t, done, 10*time.Second); c.Err != nil {
		t.Fatal(c.Err)
	}
	b.SendAll([]*Call{
		{Script: incr, Keys: []string{kA}, Args: []any{1}, Node: 0, Done: done}, // incr's first call: A
		{Script: incr, Keys: []string{kB}, Args: []any{2}, Node: 1, Done: done}, // its first on B
		{Script: echo, Keys: []string{kB}, Args: []any{3}, Node: 2, Done: done}, // runs, behind it
	})
	for range 3 {
		if c := wait(t, done, 10*time.Second); c.Err != nil || c.Val != int64(c.Node+1) {
			t.Errorf("call %d: %d, %v; want %d", c.Node, c.Val, c.Err, c.Node+1)
		}
	}
}

// keysOnTwoMasters returns two keys that masters of rdb's Cluster own, a different one each.
func keysOnTwoMasters(t *testing.T, rdb *redis.ClusterClient) (string, string) {
	t.Helper()
	first, err := rdb.MasterForKey(ctx, "k0")
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i < 1000; i++ {
		k := fmt.Sprintf("k%d", i)
		m, err := rdb.MasterForKey(ctx, k)
		if err != nil {
			t.Fatal(err)
		}
		if m.Options().Addr != first.Options().Addr {
			return "k0", k
		}
	}
	t.Fatal("every key fell on one master")
	return "", ""
}

// TestFirstCallEval: on a fresh server, the first call of a script goes out as EVAL and
// the next as EVALSHA, through each go-redis transport and SendAll: no NOSCRIPT answer,
// one script run per call.
func TestFirstCallEval(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		send func(b *Batcher, c *Call)
		new  func(rdb *redis.Client) *Batcher
	}{
		{"lanes", func(b *Batcher, c *Call) { b.Send(c) }, func(rdb *redis.Client) *Batcher { return goredis(rdb, 2) }},
		{"auto", func(b *Batcher, c *Call) { b.Send(c) }, func(rdb *redis.Client) *Batcher { return autoPipeline(rdb, 2) }},
		{"SendAll", func(b *Batcher, c *Call) { b.SendAll([]*Call{c}) }, func(rdb *redis.Client) *Batcher { return goredis(rdb, 2) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb := redistest.Start(t).Client(t)
			b := tc.new(rdb)
			defer b.Stop()
			done := make(chan *Call, 1)
			for i := range 2 {
				tc.send(b, &Call{Script: incr, Keys: []string{"k"}, KeyArgs: []any{"k"}, Args: []any{1}, Done: done})
				if c := wait(t, done, 20*time.Second); c.Err != nil || c.Val != int64(i+1) {
					t.Fatalf("call %d: %d, %v", i, c.Val, c.Err)
				}
			}
			if stats := commandStats(t, rdb); stats["eval"] != 1 || stats["evalsha"] != 1 {
				t.Fatalf("the server ran %v; want one EVAL, then one EVALSHA", stats)
			}
		})
	}
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

// TestTransportChoice: New carries single calls on go-redis pipelines for every client,
// whatever its options; an Unordered AutoPipeliner, which would let an Unlock overtake its
// Lock, is not used.
func TestTransportChoice(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	for _, tt := range []struct {
		name string
		opts func(*redis.Options)
	}{
		{"plain", nil},
		{"OnConnect", func(o *redis.Options) { o.OnConnect = func(context.Context, *redis.Conn) error { return nil } }},
	} {
		o := srv.Options()
		if tt.opts != nil {
			tt.opts(o)
		}
		rdb := redis.NewClient(o)
		b := New(rdb, 2)
		if b.a != nil || b.l == nil {
			t.Errorf("%s: New: auto = %v, lanes = %v", tt.name, b.a != nil, b.l != nil)
		}
		if c := call(t, b, echo, nil, 3); c.Err != nil || c.Val != 3 {
			t.Errorf("%s: %d, %v", tt.name, c.Val, c.Err)
		}
		b.Stop()
		_ = rdb.Close()
	}
	o := srv.Options()
	o.AutoPipelineOptions = &redis.AutoPipelineOptions{Unordered: true, MaxConcurrentBatches: 2}
	unordered := redis.NewClient(o)
	defer unordered.Close()
	if a := newAuto(unordered, 2); a != nil {
		a.stop()
		t.Error("an Unordered AutoPipeliner was used")
	}
	ring := redis.NewRing(&redis.RingOptions{Addrs: map[string]string{"a": srv.Addr}})
	defer ring.Close()
	b := New(ring, 2)
	defer b.Stop()
	if b.l == nil {
		t.Error("a Ring did not get go-redis pipelines")
	}
	nilClient := New(nil, 0)
	done := make(chan *Call, 1)
	nilClient.Send(&Call{Script: echo, Done: done})
	nilClient.Stop()
	if c := wait(t, done, time.Second); !errors.Is(c.Err, ErrStopped) {
		t.Errorf("New(nil, 0): %v", c.Err)
	}
}
