package quorum

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

var ctx = context.Background()

func TestMajority(t *testing.T) {
	t.Parallel()
	for n, want := range map[int]int{1: 1, 2: 2, 3: 2, 4: 3, 5: 3, 6: 4, 7: 4, 9: 5} {
		if got := Majority(n); got != want {
			t.Errorf("Majority(%d) = %d, want %d", n, got, want)
		}
		// Any two majorities overlap, and a majority survives the loss of the rest.
		if 2*Majority(n) <= n {
			t.Errorf("two majorities of %d need not overlap", n)
		}
	}
}

func TestUntilFree(t *testing.T) {
	t.Parallel()
	ms := func(v ...int) []time.Duration {
		var d []time.Duration
		for _, x := range v {
			d = append(d, time.Duration(x)*time.Millisecond)
		}
		return d
	}
	for _, tt := range []struct {
		need int
		left []time.Duration
		want time.Duration
		ok   bool
	}{
		{0, nil, 0, true},                          // a majority is free already
		{-1, ms(5), 0, true},                       // more than a majority is
		{1, ms(300), 300 * time.Millisecond, true}, // one deployment
		{1, ms(900, 200, 500), 200 * time.Millisecond, true},
		{2, ms(900, 200, 500), 500 * time.Millisecond, true}, // 3 nodes, none free
		{3, ms(900, 200, 500), 900 * time.Millisecond, true},
		{2, ms(700), 0, false}, // the others: no expiry, or no answer
		{1, nil, 0, false},     // nothing known
		{2, ms(0, 0), 0, true}, // both about to expire
		{3, ms(4, 4, 1, 9), 4 * time.Millisecond, true},
	} {
		left := slices.Clone(tt.left)
		got, ok := UntilFree(tt.need, left)
		if got != tt.want || ok != tt.ok {
			t.Errorf("UntilFree(%d, %v) = %v, %v; want %v, %v", tt.need, tt.left, got, ok, tt.want, tt.ok)
		}
	}
}

func TestDrift(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		ttl    time.Duration
		factor float64
		want   time.Duration
	}{
		{30 * time.Second, 0.01, 302 * time.Millisecond},
		{10 * time.Second, 0.01, 102 * time.Millisecond},
		{time.Second, 0.01, 12 * time.Millisecond},
		{10 * time.Millisecond, 0.01, 2*time.Millisecond + 100*time.Microsecond},
		{30 * time.Second, 0, 2 * time.Millisecond},
		{time.Minute, 0.05, 3*time.Second + 2*time.Millisecond},
	} {
		if got := Drift(tt.ttl, tt.factor); got != tt.want {
			t.Errorf("Drift(%v, %v) = %v, want %v", tt.ttl, tt.factor, got, tt.want)
		}
	}
}

func TestDeadline(t *testing.T) {
	t.Parallel()
	start := time.Now()
	for _, tt := range []struct {
		ttl    time.Duration
		factor float64
		want   time.Duration // after start
	}{
		{30 * time.Second, 0.01, 30*time.Second - 302*time.Millisecond},
		{time.Second, 0.01, time.Second - 12*time.Millisecond},
		{10 * time.Millisecond, 0.01, 10*time.Millisecond - 2100*time.Microsecond},
		{30 * time.Second, 0, 30*time.Second - 2*time.Millisecond},
	} {
		got := Deadline(start, tt.ttl, tt.factor)
		if d := got.Sub(start); d != tt.want {
			t.Errorf("Deadline(start, %v, %v) = start+%v, want start+%v", tt.ttl, tt.factor, d, tt.want)
		}
		if !got.After(start) || got.After(start.Add(tt.ttl)) {
			t.Errorf("Deadline(start, %v, %v) not within (start, start+ttl]", tt.ttl, tt.factor)
		}
	}
	// The monotonic reading survives, so that wall-clock jumps do not move the deadline.
	if got := Deadline(start, time.Second, 0.01); got.String() == got.Round(0).String() {
		t.Error("Deadline dropped the monotonic clock reading")
	}
}

func TestNodeTimeout(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ ttl, want time.Duration }{
		{10 * time.Millisecond, 5 * time.Millisecond}, // floor
		{50 * time.Millisecond, 5 * time.Millisecond},
		{100 * time.Millisecond, 10 * time.Millisecond},
		{time.Second, 100 * time.Millisecond},
		{5 * time.Second, 500 * time.Millisecond},
		{30 * time.Second, 500 * time.Millisecond}, // ceiling
		{time.Hour, 500 * time.Millisecond},
	} {
		if got := NodeTimeout(tt.ttl); got != tt.want {
			t.Errorf("NodeTimeout(%v) = %v, want %v", tt.ttl, got, tt.want)
		}
	}
}

// nodes starts n servers, each with a batcher. The batchers are stopped, and paused servers
// resumed, by the test's cleanup.
func nodes(t *testing.T, n int) ([]*redistest.Server, []*redis.Client, []*batch.Batcher) {
	t.Helper()
	return nodesWith(t, n, nil)
}

func nodesWith(t *testing.T, n int, opts func(*redis.Options)) ([]*redistest.Server, []*redis.Client, []*batch.Batcher) {
	t.Helper()
	srvs := redistest.StartNodes(t, n)
	rdbs := make([]*redis.Client, n)
	bs := make([]*batch.Batcher, n)
	for i, s := range srvs {
		o := s.Options()
		o.MaxRetries = -1
		if opts != nil {
			opts(o)
		}
		rdbs[i] = redis.NewClient(o)
		t.Cleanup(func() { _ = rdbs[i].Close() })
		bs[i] = batch.New(rdbs[i], 1)
		t.Cleanup(bs[i].Stop)
	}
	return srvs, rdbs, bs
}

// pause pauses s until the end of the test; the cleanup resumes it before the batchers stop.
func pause(t *testing.T, s *redistest.Server) {
	t.Helper()
	s.Pause(t)
	t.Cleanup(func() { s.Resume(t) })
}

// incr is a script with an effect: INCRBY KEYS[1] by 1 and returns the result.
var incr = redis.NewScript(`return redis.call('INCRBY', KEYS[1], 1)`)

func prepareIncr(key string) func(c *batch.Call, j int) {
	return func(c *batch.Call, _ int) {
		c.Script = incr
		c.Keys = []string{key}
	}
}

func TestFanoutAllNodes(t *testing.T) {
	t.Parallel()
	_, rdbs, bs := nodes(t, 3)
	var seen []int
	start := time.Now()
	got := Fanout(ctx, time.Now(), bs, make([]batch.Call, len(bs)), 1, nil, 10*time.Second, prepareIncr("k"), func(c *batch.Call) bool {
		if c.Err != nil || c.Val != 1 {
			t.Errorf("node %d: %d, %v", c.Node, c.Val, c.Err)
		}
		if c.Deadline.IsZero() || c.Deadline.After(start.Add(10*time.Second+time.Second)) {
			t.Errorf("node %d: Deadline %v, want about start+10s", c.Node, c.Deadline)
		}
		seen = append(seen, c.Node)
		return false
	})
	if got != 3 {
		t.Fatalf("Fanout = %d, want 3", got)
	}
	slices.Sort(seen)
	if !slices.Equal(seen, []int{0, 1, 2}) {
		t.Fatalf("replies from nodes %v, want [0 1 2]", seen)
	}
	for i, r := range rdbs {
		if v := r.Get(ctx, "k").Val(); v != "1" {
			t.Fatalf("node %d: k = %q, want 1", i, v)
		}
	}
}

// TestFanoutDecidedEarly: once tally reports a decision, Fanout returns without waiting for
// the other nodes, even if one of them hangs; also on clients whose callers may send their
// own calls (ContextTimeoutEnabled), where the hung node's call, sent last, must not be
// sent by Fanout's caller and hold it up.
func TestFanoutDecidedEarly(t *testing.T) {
	t.Parallel()
	for _, bounded := range []bool{false, true} {
		t.Run(fmt.Sprintf("ContextTimeoutEnabled=%v", bounded), func(t *testing.T) {
			t.Parallel()
			srvs, _, bs := nodesWith(t, 3, func(o *redis.Options) {
				o.ContextTimeoutEnabled = bounded
				o.ReadTimeout = 10 * time.Second
			})
			pause(t, srvs[2])
			calls := 0
			start := time.Now()
			got := Fanout(ctx, time.Now(), bs, make([]batch.Call, len(bs)), 1, nil, 20*time.Second, prepareIncr("k"), func(c *batch.Call) bool {
				calls++
				if c.Node == 2 {
					t.Errorf("a reply from the paused node: %+v", c)
				}
				return calls == 1
			})
			if got != 1 || calls != 1 {
				t.Fatalf("Fanout = %d after %d tallies, want 1 and 1", got, calls)
			}
			if e := time.Since(start); e > 5*time.Second {
				t.Fatalf("a decided Fanout took %v: it waited for the paused node", e)
			}
		})
	}
}

// TestFanoutLoneCall: a Fanout of one call to one node, on a client whose callers may send
// their own calls, has the reply when the call returns, and is back by its timeout from a
// node that does not answer.
func TestFanoutLoneCall(t *testing.T) {
	t.Parallel()
	srvs, _, bs := nodesWith(t, 2, func(o *redis.Options) { o.ContextTimeoutEnabled = true })
	for i := range 3 {
		got := Fanout(ctx, time.Now(), bs, make([]batch.Call, len(bs)), 1, []int{0}, 10*time.Second, prepareIncr("lone"), func(c *batch.Call) bool {
			if c.Node != 0 || c.Err != nil || c.Val != int64(i+1) {
				t.Errorf("reply %+v, want %d from node 0", c, i+1)
			}
			return true
		})
		if got != 1 {
			t.Fatalf("Fanout = %d, want 1", got)
		}
	}
	pause(t, srvs[1])
	const timeout = 300 * time.Millisecond
	start := time.Now()
	Fanout(ctx, time.Now(), bs, make([]batch.Call, len(bs)), 1, []int{1}, timeout, prepareIncr("lone"), func(c *batch.Call) bool { return true })
	if e := time.Since(start); e > 3*time.Second {
		t.Fatalf("a lone call to a paused node took %v with a %v timeout", e, timeout)
	}
}

// TestFanoutHungNode: with a paused node among three and no decision, Fanout returns after
// the per-node timeout with the two replies it has.
func TestFanoutHungNode(t *testing.T) {
	t.Parallel()
	srvs, _, bs := nodes(t, 3)
	pause(t, srvs[1])
	const timeout = 300 * time.Millisecond
	var seen []int
	start := time.Now()
	got := Fanout(ctx, time.Now(), bs, make([]batch.Call, len(bs)), 1, nil, timeout, prepareIncr("k"), func(c *batch.Call) bool {
		seen = append(seen, c.Node)
		return false
	})
	elapsed := time.Since(start)
	if got != 2 {
		t.Fatalf("Fanout = %d (nodes %v), want 2", got, seen)
	}
	if slices.Contains(seen, 1) {
		t.Fatalf("a reply from the paused node: %v", seen)
	}
	if elapsed < timeout {
		t.Fatalf("Fanout returned after %v, before the %v timeout", elapsed, timeout)
	}
	if elapsed > 5*time.Second {
		t.Fatalf("Fanout took %v with a %v timeout", elapsed, timeout)
	}
}

// TestFanoutFullQueue: a hung node whose queue is full (a busy process) must not hold up
// the fan-out to the other nodes, nor Fanout itself past its timeout.
func TestFanoutFullQueue(t *testing.T) {
	t.Parallel()
	// A long read timeout: the hung node's worker is stuck for all of it.
	srvs, _, bs := nodesWith(t, 3, func(o *redis.Options) { o.ReadTimeout = 10 * time.Second })
	// Keep node 1's queue full, as a busy process would: its worker is stuck on a round
	// trip and the queue fills up with calls that will not expire soon.
	var filler sync.WaitGroup
	t.Cleanup(filler.Wait) // after the node is resumed, which lets the filler's Send return
	pause(t, srvs[1])
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	filled := make(chan struct{})
	filler.Go(func() {
		for i := 0; ; i++ {
			if i == 1024+1 {
				close(filled)
			}
			select {
			case <-stop:
				return
			default:
			}
			call := &batch.Call{Script: incr, Keys: []string{"backlog"}, Deadline: time.Now().Add(time.Second), Done: make(chan *batch.Call, 1)}
			if !bs[1].Send(call) {
				return
			}
		}
	})
	<-filled
	const timeout = 300 * time.Millisecond
	for range 3 {
		var seen []int
		start := time.Now()
		got := Fanout(ctx, time.Now(), bs, make([]batch.Call, len(bs)), 1, nil, timeout, prepareIncr("k"), func(c *batch.Call) bool {
			if c.Node == 1 {
				// At the deadline, the call that found no room is answered as expired; it
				// may beat Fanout's own timer.
				if !batch.IsExpired(c.Err) {
					t.Errorf("node 1: %d, %v; want the expiry error", c.Val, c.Err)
				}
				return false
			}
			if c.Err != nil {
				t.Errorf("node %d: %v", c.Node, c.Err)
			}
			seen = append(seen, c.Node)
			return false
		})
		e := time.Since(start)
		slices.Sort(seen)
		if got < 2 || !slices.Equal(seen, []int{0, 2}) {
			t.Fatalf("Fanout = %d, healthy nodes %v answered after %v; want [0 2]", got, seen, e)
		}
		if e > 3*time.Second {
			t.Fatalf("Fanout took %v with a %v timeout: it waited for room in the hung node's queue", e, timeout)
		}
	}
}

// TestFanoutContext: ctx cancellation and a ctx deadline shorter than the timeout end the
// fan-out; a ctx already done sends nothing that could still run after the deadline.
func TestFanoutContext(t *testing.T) {
	t.Parallel()
	srvs, _, bs := nodes(t, 3)
	for _, s := range srvs {
		pause(t, s)
	}
	never := func(*batch.Call) bool { return false }

	t.Run("cancel", func(t *testing.T) {
		start := time.Now()
		cctx, cancel := context.WithCancel(ctx)
		time.AfterFunc(100*time.Millisecond, cancel)
		if got := Fanout(cctx, time.Now(), bs, make([]batch.Call, len(bs)), 1, nil, time.Minute, prepareIncr("k"), never); got != 0 {
			t.Fatalf("Fanout = %d, want 0", got)
		}
		if e := time.Since(start); e < 100*time.Millisecond || e > 10*time.Second {
			t.Fatalf("Fanout returned after %v; the cancel came after 100ms", e)
		}
	})

	t.Run("deadline", func(t *testing.T) {
		start := time.Now()
		dctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
		defer cancel()
		if got := Fanout(dctx, time.Now(), bs, make([]batch.Call, len(bs)), 1, nil, time.Minute, prepareIncr("k"), never); got != 0 {
			t.Fatalf("Fanout = %d, want 0", got)
		}
		if e := time.Since(start); e < 150*time.Millisecond || e > 10*time.Second {
			t.Fatalf("Fanout returned after %v with a 150ms ctx deadline", e)
		}
	})
}

// TestFanoutCallDeadline: each call's Deadline is the per-node timeout, or the ctx deadline
// if that comes first, so that a call still queued then is never sent.
func TestFanoutCallDeadline(t *testing.T) {
	t.Parallel()
	stopped := batch.New(nil, 0) // answers every call at once with ErrStopped
	stopped.Stop()
	bs := []*batch.Batcher{stopped, stopped}
	deadlineOf := func(ctx context.Context, timeout time.Duration) []time.Time {
		var got []time.Time
		Fanout(ctx, time.Now(), bs, make([]batch.Call, len(bs)), 1, nil, timeout, prepareIncr("k"), func(c *batch.Call) bool {
			got = append(got, c.Deadline)
			return false
		})
		return got
	}

	dctx, cancel := context.WithTimeout(ctx, 150*time.Millisecond)
	defer cancel()
	want, _ := dctx.Deadline()
	if got := deadlineOf(dctx, time.Minute); len(got) != 2 || !got[0].Equal(want) || !got[1].Equal(want) {
		t.Fatalf("call deadlines %v, want the ctx deadline %v", got, want)
	}

	before := time.Now()
	got := deadlineOf(ctx, time.Second)
	if len(got) != 2 || got[0].Before(before.Add(time.Second)) || got[0].After(time.Now().Add(time.Second)) || !got[0].Equal(got[1]) {
		t.Fatalf("call deadlines %v, want one instant about 1s from now", got)
	}
}

// TestFanoutStoppedBatcher: a stopped node answers ErrStopped at once.
func TestFanoutStoppedBatcher(t *testing.T) {
	t.Parallel()
	_, _, bs := nodes(t, 3)
	bs[0].Stop()
	errs := map[int]error{}
	got := Fanout(ctx, time.Now(), bs, make([]batch.Call, len(bs)), 1, nil, 10*time.Second, prepareIncr("k"), func(c *batch.Call) bool {
		errs[c.Node] = c.Err
		return false
	})
	if got != 3 {
		t.Fatalf("Fanout = %d, want 3", got)
	}
	if !errors.Is(errs[0], batch.ErrStopped) || errs[1] != nil || errs[2] != nil {
		t.Fatalf("errors %v, want ErrStopped from node 0 only", errs)
	}
}

// TestFanoutTo: Fanout with a list sends only to the listed nodes.
func TestFanout(t *testing.T) {
	t.Parallel()
	_, rdbs, bs := nodes(t, 5)
	for _, only := range [][]int{{1, 3}, {4}, {0, 1, 2, 3, 4}, {}} {
		key := "k" + strconv.Itoa(len(only))
		var seen []int
		got := Fanout(ctx, time.Now(), bs, make([]batch.Call, len(bs)), 1, only, 10*time.Second, prepareIncr(key), func(c *batch.Call) bool {
			if c.Err != nil {
				t.Errorf("node %d: %v", c.Node, c.Err)
			}
			seen = append(seen, c.Node)
			return false
		})
		if got != len(only) {
			t.Fatalf("Fanout(%v) = %d", only, got)
		}
		slices.Sort(seen)
		if !slices.Equal(seen, only) && len(only) > 0 {
			t.Fatalf("Fanout(%v) heard from %v", only, seen)
		}
		for i, r := range rdbs {
			want := int64(0)
			if slices.Contains(only, i) {
				want = 1
			}
			if n := r.Exists(ctx, key).Val(); n != want {
				t.Fatalf("Fanout(%v): node %d has the key: %d, want %d", only, i, n, want)
			}
		}
	}
}

// TestFanoutSeveralCallsPerNode: with perNode calls per node, call j of node i is prepared
// as j and goes to node i, and every reply is handed to tally.
func TestFanoutSeveralCallsPerNode(t *testing.T) {
	t.Parallel()
	_, rdbs, bs := nodes(t, 3)
	const perNode = 4
	calls := make([]batch.Call, len(bs)*perNode)
	per := make([]int, len(bs))
	got := Fanout(ctx, time.Now(), bs, calls, perNode, []int{0, 2}, 10*time.Second, func(c *batch.Call, j int) {
		c.Script = incr
		c.Keys = []string{"part" + strconv.Itoa(j)}
	}, func(c *batch.Call) bool {
		if c.Err != nil {
			t.Errorf("node %d: %v", c.Node, c.Err)
		}
		per[c.Node]++
		return false
	})
	if got != 2*perNode || per[0] != perNode || per[1] != 0 || per[2] != perNode {
		t.Fatalf("Fanout = %d replies, by node %v; want %d, [%d 0 %d]", got, per, 2*perNode, perNode, perNode)
	}
	for i, r := range rdbs {
		for j := range perNode {
			want := "1"
			if i == 1 {
				want = ""
			}
			if v := r.Get(ctx, "part"+strconv.Itoa(j)).Val(); v != want {
				t.Fatalf("node %d part%d = %q, want %q", i, j, v, want)
			}
		}
	}
}

// TestFanoutLateReplies: the replies that come after the decision must not block the
// batcher (the reply channel has room for every call, not just the ones tallied).
func TestFanoutLateReplies(t *testing.T) {
	t.Parallel()
	_, rdbs, bs := nodes(t, 4)
	got := Fanout(ctx, time.Now(), bs, make([]batch.Call, len(bs)), 1, nil, 10*time.Second, prepareIncr("k"), func(c *batch.Call) bool { return true })
	if got != 1 {
		t.Fatalf("Fanout = %d, want 1", got)
	}
	deadline := time.Now().Add(10 * time.Second)
	for _, r := range rdbs {
		for r.Get(ctx, "k").Val() != "1" {
			if time.Now().After(deadline) {
				t.Fatalf("k = %q, want 1", r.Get(ctx, "k").Val())
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	// The batcher still works.
	if got := Fanout(ctx, time.Now(), bs, make([]batch.Call, len(bs)), 1, nil, 10*time.Second, prepareIncr("k2"), func(c *batch.Call) bool { return false }); got != 4 {
		t.Fatalf("Fanout after = %d", got)
	}
}

// callerKey is the key of a value in the caller's context, as a tracer keeps its span.
type callerKey struct{}

// valueHook records the caller's value in the context of each script a client runs.
type valueHook struct {
	mu   sync.Mutex
	seen []any
}

func (h *valueHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *valueHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		if name := cmd.Name(); name == "eval" || name == "evalsha" {
			h.mu.Lock()
			h.seen = append(h.seen, ctx.Value(callerKey{}))
			h.mu.Unlock()
		}
		return next(ctx, cmd)
	}
}

func (h *valueHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestFanoutCarriesCallerValues: each node's call carries the values of Fanout's ctx to
// the go-redis hooks of its node's client, as a tracing hook needs to find the caller's
// span.
func TestFanoutCarriesCallerValues(t *testing.T) {
	t.Parallel()
	_, rdbs, bs := nodes(t, 3)
	hooks := make([]*valueHook, len(rdbs))
	for i, r := range rdbs {
		hooks[i] = &valueHook{}
		r.AddHook(hooks[i])
	}
	callerCtx := context.WithValue(ctx, callerKey{}, "caller")
	got := Fanout(callerCtx, time.Now(), bs, make([]batch.Call, len(bs)), 1, nil, 10*time.Second, prepareIncr("v"), func(c *batch.Call) bool {
		if c.Err != nil {
			t.Errorf("node %d: %v", c.Node, c.Err)
		}
		return false
	})
	if got != 3 {
		t.Fatalf("Fanout = %d, want 3", got)
	}
	for i, h := range hooks {
		h.mu.Lock()
		if len(h.seen) != 1 || h.seen[0] != "caller" {
			t.Errorf("node %d: the hook saw scripts with the values %v, want one with the caller's", i, h.seen)
		}
		h.mu.Unlock()
	}
}
