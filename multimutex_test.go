package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// multiEnv is a deployment for the MultiMutex tests: its Redis clients (several for a
// quorum) and a maker of dlock Clients of it, each a process of its own as far as dlock can
// tell, closed by the test's cleanup.
type multiEnv struct {
	t     *testing.T
	nodes []redis.UniversalClient
}

func (e multiEnv) client(opts ...dlock.Option) *dlock.Client {
	e.t.Helper()
	if len(e.nodes) == 1 {
		return newClient(e.t, e.nodes[0], opts...)
	}
	return newQuorumClient(e.t, e.nodes, opts...)
}

// holders counts the nodes whose key exists.
func (e multiEnv) holders(key string) int {
	n := 0
	for _, rdb := range e.nodes {
		n += int(rdb.Exists(context.Background(), key).Val())
	}
	return n
}

var multiDeployments = []struct {
	name  string
	nodes func(t *testing.T) []redis.UniversalClient
}{
	{"standalone", func(t *testing.T) []redis.UniversalClient {
		_, rdb := standalone(t)
		return []redis.UniversalClient{rdb}
	}},
	{"cluster", func(t *testing.T) []redis.UniversalClient {
		return []redis.UniversalClient{redistest.StartCluster(t, 3).Client(t)}
	}},
	{"quorum", func(t *testing.T) []redis.UniversalClient {
		_, nodes, _ := quorumOf(t, 3)
		return nodes
	}},
}

// onEach runs f on a standalone server, a three-master Cluster and a quorum of three.
func onEach(t *testing.T, f func(t *testing.T, e multiEnv)) {
	for _, d := range multiDeployments {
		t.Run(d.name, func(t *testing.T) {
			t.Parallel()
			f(t, multiEnv{t: t, nodes: d.nodes(t)})
		})
	}
}

// bySlot returns names sorted by the Redis Cluster hash slot of their lock keys under the
// default prefix: the order in which a MultiMutex takes them on a Cluster. It fails the
// test unless they are all in different slots.
func bySlot(t *testing.T, names ...string) []string {
	t.Helper()
	slot := func(name string) int { return keyspace.Slot(keysOf(name).Lock) }
	out := slices.Clone(names)
	slices.SortFunc(out, func(a, b string) int { return slot(a) - slot(b) })
	for i := 1; i < len(out); i++ {
		if slot(out[i]) == slot(out[i-1]) {
			t.Fatalf("%q and %q share a slot: choose other names", out[i-1], out[i])
		}
	}
	return out
}

// TestMultiMutexLockUnlock: every name's Mutex key holds the lease's token on every node
// while it is held, and none after Unlock.
func TestMultiMutexLockUnlock(t *testing.T) {
	onEach(t, func(t *testing.T, e multiEnv) {
		c := e.client()
		ctx := ctxTimeout(t, 20*time.Second)
		names := []string{"acct:2", "acct:1", "acct:3"}
		l, err := c.MultiMutex(names).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if l.Name() != "acct:2,acct:1,acct:3" || l.Err() != nil {
			t.Fatalf("lease: name %q, err %v", l.Name(), l.Err())
		}
		for _, name := range names {
			// Lock returns once a majority granted; the other nodes follow at once.
			waitFor(t, 5*time.Second, name+" held on every node", func() bool { return e.holders(keysOf(name).Lock) == len(e.nodes) })
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if l.Err() != dlock.ErrReleased {
			t.Fatalf("Err after Unlock = %v", l.Err())
		}
		for _, name := range names {
			waitFor(t, 5*time.Second, name+" released on every node", func() bool { return e.holders(keysOf(name).Lock) == 0 })
		}
		if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("second Unlock = %v, want ErrNotHeld", err)
		}
	})
}

// TestMultiMutexBadInput: names a MultiMutex cannot lock give a clear error from every
// method, never a panic, and nothing is written.
func TestMultiMutexBadInput(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	for _, tt := range []struct {
		names []string
		opts  []dlock.LockOption
		want  string
	}{
		{nil, nil, "needs at least one name"},
		{[]string{}, nil, "needs at least one name"},
		{[]string{""}, nil, "names[0]: empty lock name"},
		{[]string{"a", ""}, nil, "names[1]: empty lock name"},
		{[]string{"a", "b", "a"}, nil, `"a" is given twice (names[0] and names[2])`},
		{[]string{"a", "b}c"}, nil, "names[1]: lock key \"dlock:b}c\" has a '}' outside a hash tag"},
		{[]string{"a", "b"}, []dlock.LockOption{dlock.TTL(time.Millisecond)}, "TTL 1ms is too short"},
	} {
		m := c.MultiMutex(tt.names, tt.opts...)
		for op, call := range map[string]func() error{
			"Lock":    func() error { _, err := m.Lock(ctx); return err },
			"TryLock": func() error { _, err := m.TryLock(ctx); return err },
			"Do":      func() error { return m.Do(ctx, func(context.Context) error { t.Error("Do ran fn"); return nil }) },
		} {
			if err := call(); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%s of %q = %v, want an error saying %q", op, tt.names, err, tt.want)
			}
		}
	}
	if keys := rdb.Keys(ctx, "*").Val(); len(keys) != 0 {
		t.Fatalf("bad input wrote %v", keys)
	}
}

// TestMultiMutexObservedOnCluster: a MultiMutex over several hash slots reports each
// attempt to the observers as one Attempted event, refused by the part held elsewhere or
// acquired, and its WaitEnded counts them.
func TestMultiMutexObservedOnCluster(t *testing.T) {
	t.Parallel()
	rdb := redistest.StartCluster(t, 3).Client(t)
	c, rec := observed(t, rdb)
	other := newClient(t, rdb)
	ctx := ctxTimeout(t, 20*time.Second)
	names := bySlot(t, "a", "b", "c")
	held := mustLock(t, other.Mutex(names[2]), ctx)
	m := c.MultiMutex(names)
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock with %q held: %v, want ErrNotAcquired", names[2], err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	lease, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := lease.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	attempts, _ := of[dlock.Attempt](rec, nil)
	ends, _ := of[dlock.WaitEnd](rec, nil)
	if len(attempts) != 2 || attempts[0].Verdict != dlock.VerdictHeld || attempts[1].Verdict != dlock.VerdictAcquired {
		t.Fatalf("attempts %+v; want one held, then one acquired", attempts)
	}
	if len(ends) != 2 || ends[0].Attempts != 1 || ends[1].Attempts != 1 {
		t.Fatalf("WaitEnded %+v; want one attempt each", ends)
	}
	for _, a := range attempts {
		if a.Kind != "multi" || a.Name != strings.Join(names, ",") {
			t.Errorf("attempt %+v: want kind multi and name %q", a, strings.Join(names, ","))
		}
	}
}

// TestMultiMutexExcludesMutex: a MultiMutex and a Mutex of one of its names exclude each
// other, in both directions, and a refused MultiMutex leaves none of its names held: on a
// Cluster with the held name in the last slot taken, after the others were taken.
func TestMultiMutexExcludesMutex(t *testing.T) {
	onEach(t, func(t *testing.T, e multiEnv) {
		a, b := e.client(), e.client()
		ctx := ctxTimeout(t, 20*time.Second)
		names := bySlot(t, "stock:1", "stock:2", "stock:3")
		last := names[len(names)-1]

		held := mustLock(t, a.Mutex(last), ctx)
		waitFor(t, 5*time.Second, last+" held on every node", func() bool { return e.holders(keysOf(last).Lock) == len(e.nodes) })
		if _, err := b.MultiMutex(names).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("TryLock of a set with one name held = %v, want ErrNotAcquired", err)
		}
		for _, name := range names[:len(names)-1] {
			if n := e.holders(keysOf(name).Lock); n != 0 {
				t.Fatalf("after the refused TryLock, %s is held on %d nodes", name, n)
			}
		}
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}

		l, err := b.MultiMutex(names).TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, name := range names {
			if _, err := a.Mutex(name).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("Mutex TryLock of %s while a MultiMutex holds it = %v, want ErrNotAcquired", name, err)
			}
		}
		if _, err := a.MultiMutex([]string{"stock:9", names[0]}).TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
			t.Fatalf("MultiMutex TryLock of an overlapping set = %v, want ErrNotAcquired", err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMultiMutexTokens: Tokens has one entry per name, each strictly greater than the
// name's token in every earlier acquisition, whether by a MultiMutex or a Mutex; Token is
// the largest. A Mutex lease's Tokens has its one name.
func TestMultiMutexTokens(t *testing.T) {
	onEach(t, func(t *testing.T, e multiEnv) {
		c := e.client()
		ctx := ctxTimeout(t, 30*time.Second)
		last := map[string]uint64{}
		check := func(l *dlock.Lease, names ...string) {
			t.Helper()
			tokens := l.Tokens()
			if len(tokens) != len(names) {
				t.Fatalf("Tokens() = %v, want one entry for each of %v", tokens, names)
			}
			var top uint64
			for _, name := range names {
				tok, ok := tokens[name]
				if !ok || tok <= last[name] {
					t.Fatalf("token of %s = %d (%v), want above its last, %d", name, tok, ok, last[name])
				}
				last[name] = tok
				top = max(top, tok)
			}
			if l.Token() != top {
				t.Fatalf("Token() = %d, want the largest of %v", l.Token(), tokens)
			}
			if err := l.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
		}
		for range 3 {
			for _, set := range [][]string{{"x", "y"}, {"y", "z", "w"}, {"x", "w"}} {
				l, err := c.MultiMutex(set).Lock(ctx)
				if err != nil {
					t.Fatal(err)
				}
				check(l, set...)
			}
			for _, name := range []string{"x", "y", "z"} {
				check(mustLock(t, c.Mutex(name), ctx), name)
			}
		}
	})
}

// TestMultiMutexRenewsEveryName: a lease much longer than its TTL stays valid, and every
// name's key stays alive with it, on every kind of deployment.
func TestMultiMutexRenewsEveryName(t *testing.T) {
	onEach(t, func(t *testing.T, e multiEnv) {
		c := e.client()
		ctx := ctxTimeout(t, 20*time.Second)
		names := []string{"renew:1", "renew:2", "renew:3"}
		l, err := c.MultiMutex(names, dlock.TTL(500*time.Millisecond)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for range 4 {
			time.Sleep(500 * time.Millisecond)
			if l.Err() != nil {
				t.Fatalf("lease ended while renewed: %v", l.Err())
			}
			for _, name := range names {
				if n := e.holders(keysOf(name).Lock); n < len(e.nodes)/2+1 {
					t.Fatalf("%s held on %d of %d nodes", name, n, len(e.nodes))
				}
			}
		}
		if err := l.Extend(ctx, 10*time.Second); err != nil {
			t.Fatal(err)
		}
		if left := time.Until(l.ValidUntil()); left < 5*time.Second {
			t.Fatalf("after Extend(10s), ValidUntil is %v away", left)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	})
}

// TestMultiMutexLossOfOneName: a name's key deleted from under the lease loses the whole
// lease at its next renewal, and the other names are given back at once.
func TestMultiMutexLossOfOneName(t *testing.T) {
	onEach(t, func(t *testing.T, e multiEnv) {
		c := e.client()
		ctx := ctxTimeout(t, 20*time.Second)
		names := []string{"loss:1", "loss:2", "loss:3"}
		l, err := c.MultiMutex(names, dlock.TTL(3*time.Second)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, rdb := range e.nodes {
			rdb.Del(ctx, "dlock:loss:2")
		}
		// The renewal, due a third of the TTL in, finds it: well before the 3s TTL.
		waitClosed(t, l.Done(), 2500*time.Millisecond, "Done after one name's key was deleted")
		if l.Err() != dlock.ErrLost {
			t.Fatalf("Err = %v, want ErrLost", l.Err())
		}
		for _, name := range []string{"loss:1", "loss:3"} {
			waitFor(t, 2*time.Second, name+" given back", func() bool { return e.holders(keysOf(name).Lock) == 0 })
		}
		if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
			t.Fatalf("Unlock of a lost lease = %v, want ErrNotHeld", err)
		}
	})
}

// TestMultiMutexWakesMutexWaiter: a Mutex waiting for one of the names gets it within a
// moment of the MultiMutex's Unlock, not at the end of the MultiMutex's 30s lease; and a
// MultiMutex waiting for a name a Mutex holds gets the set within a moment of the Mutex's
// Unlock.
func TestMultiMutexWakesMutexWaiter(t *testing.T) {
	onEach(t, func(t *testing.T, e multiEnv) {
		a, b := e.client(), e.client()
		ctx := ctxTimeout(t, 20*time.Second)
		names := []string{"wake:1", "wake:2", "wake:3"}
		const promptly = 2 * time.Second // against a 30s TTL

		multi, err := a.MultiMutex(names).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		got := acquiredAt(t, ctx, b.Mutex("wake:2").Lock)
		time.Sleep(300 * time.Millisecond) // the Mutex waits
		released := time.Now()
		if err := multi.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if at := <-got; at.IsZero() || at.Sub(released) > promptly {
			t.Fatalf("the Mutex waiter got the lock %v after the MultiMutex's Unlock, want within %v", at.Sub(released), promptly)
		}

		held := mustLock(t, b.Mutex("wake:3"), ctx)
		got = acquiredAt(t, ctx, a.MultiMutex(names).Lock)
		time.Sleep(300 * time.Millisecond)
		released = time.Now()
		if err := held.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
		if at := <-got; at.IsZero() || at.Sub(released) > promptly {
			t.Fatalf("the MultiMutex waiter got the set %v after the Mutex's Unlock, want within %v", at.Sub(released), promptly)
		}
	})
}

// TestMultiMutexNotReentrant: a Lock whose ctx carries a live lease of the same Client on
// one of the names returns an error at once instead of waiting for itself.
func TestMultiMutexNotReentrant(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 10*time.Second)
	m := c.MultiMutex([]string{"re:1", "re:2"})
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	if _, err := m.Lock(l.Context()); err == nil || !strings.Contains(err.Error(), `live lease on "re:1"`) {
		t.Fatalf("Lock with the lease's context = %v, want the not-re-entrant error", err)
	}
	if _, err := c.MultiMutex([]string{"re:3", "re:2"}).TryLock(l.Context()); err == nil || !strings.Contains(err.Error(), "not re-entrant") {
		t.Fatalf("TryLock of an overlapping set with the lease's context = %v", err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	mu := mustLock(t, c.Mutex("re:2"), ctx)
	if _, err := m.Lock(mu.Context()); err == nil || !strings.Contains(err.Error(), `live lease on "re:2"`) {
		t.Fatalf("Lock with a Mutex lease's context = %v, want the not-re-entrant error", err)
	}
	if waited := time.Since(start); waited > 5*time.Second {
		t.Fatalf("the refusals took %v", waited)
	}
	// An ended lease in ctx is no obstacle (its values, without its cancellation).
	_ = mu.Unlock(ctx)
	l, err = m.Lock(context.WithoutCancel(mu.Context()))
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Unlock(ctx)
}

// TestMultiMutexCloseReleases: Close gives back every name of a MultiMutex lease.
func TestMultiMutexCloseReleases(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3).Client(t)
	c := dlock.New(cl)
	ctx := ctxTimeout(t, 10*time.Second)
	names := []string{"close:1", "close:2", "close:3"}
	l, err := c.MultiMutex(names).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Err() != dlock.ErrReleased {
		t.Fatalf("Err after Close = %v", l.Err())
	}
	for _, name := range names {
		if cl.Exists(ctx, keysOf(name).Lock).Val() != 0 {
			t.Fatalf("%s still held after Close", name)
		}
	}
}

// TestMultiMutexContention: goroutines of several Clients lock random sets of two or
// three of five names with MultiMutexes, and others single names with Mutexes, each
// incrementing every name's counter by read-modify-write guarded only by the lock, and
// checking each name's fencing token against the last one seen. Every counter ends exact,
// every token grows, and everyone finishes within a bounded time: no deadlock.
func TestMultiMutexContention(t *testing.T) {
	onEach(t, func(t *testing.T, e multiEnv) {
		multiContention(t, e, 3, 4, 2, 12)
	})
}

// multiContention runs procs Clients, each with multis MultiMutex goroutines and mutexes
// Mutex goroutines, every goroutine making rounds acquisitions.
func multiContention(t *testing.T, e multiEnv, procs, multis, mutexes, rounds int) {
	names := []string{"a", "b", "c", "d", "e"}
	data := e.nodes[0]
	ctx := ctxTimeout(t, 3*time.Minute)
	deadline := time.Now().Add(2 * time.Minute)
	var expected [5]atomic.Int64
	var lastToken [5]atomic.Uint64
	index := func(name string) int { return slices.Index(names, name) }

	// critical runs under the lease of set: each counter read, then written one up, with a
	// pause between so that an overlap would lose an increment.
	critical := func(l *dlock.Lease, set []string) error {
		tokens := l.Tokens()
		for _, name := range set {
			i := index(name)
			if prev := lastToken[i].Swap(tokens[name]); tokens[name] <= prev {
				return fmt.Errorf("token of %s went from %d to %d", name, prev, tokens[name])
			}
			v, err := data.Get(ctx, "count:{x}"+name).Int()
			if err != nil && !errors.Is(err, redis.Nil) {
				return err
			}
			time.Sleep(time.Duration(rand.IntN(1500)) * time.Microsecond)
			if err := data.Set(ctx, "count:{x}"+name, v+1, 0).Err(); err != nil {
				return err
			}
			expected[i].Add(1)
		}
		return l.Err()
	}
	var wg sync.WaitGroup
	errs := make(chan error, procs*(multis+mutexes))
	worker := func(lock func() (*dlock.Lease, []string, error)) {
		defer wg.Done()
		for range rounds {
			l, set, err := lock()
			if err == nil {
				err = critical(l, set)
				if uerr := l.Unlock(ctx); err == nil {
					err = uerr
				}
			}
			if err != nil {
				errs <- err
				return
			}
			time.Sleep(time.Duration(rand.IntN(3)) * time.Millisecond)
		}
	}
	for range procs {
		c := e.client()
		for range multis {
			wg.Add(1)
			go worker(func() (*dlock.Lease, []string, error) {
				perm := rand.Perm(len(names))
				set := make([]string, 2+rand.IntN(2))
				for i := range set {
					set[i] = names[perm[i]]
				}
				l, err := c.MultiMutex(set).Lock(ctx)
				return l, set, err
			})
		}
		for range mutexes {
			wg.Add(1)
			go worker(func() (*dlock.Lease, []string, error) {
				name := names[rand.IntN(len(names))]
				l, err := c.Mutex(name).Lock(ctx)
				return l, []string{name}, err
			})
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(time.Until(deadline)):
		t.Fatalf("the workers did not finish within 2 minutes: a deadlock or a stall")
	}
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	total := int64(0)
	for i, name := range names {
		got, _ := data.Get(ctx, "count:{x}"+name).Int64()
		if got != expected[i].Load() {
			t.Errorf("counter of %s = %d, want %d: increments overlapped", name, got, expected[i].Load())
		}
		total += got
	}
	t.Logf("%d increments over %d names", total, len(names))
}

// TestMultiMutexWaitersDoNotPollEachOther: on a Cluster, two MultiMutexes of the same two
// names, blocked on the later slot by a Mutex, give back the earlier slot at every attempt,
// which publishes its release. Each listens only to the slot that refused it, so that
// release does not wake the other: while the Mutex holds on, they make a few attempts
// each, not one per round trip. When the Mutex lets go, both get the set in turn.
func TestMultiMutexWaitersDoNotPollEachOther(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	e := multiEnv{t: t, nodes: []redis.UniversalClient{cl.Client(t)}}
	ctx := ctxTimeout(t, 20*time.Second)
	names := bySlot(t, "pp:1", "pp:2")
	blocker := mustLock(t, e.client().Mutex(names[1]), ctx)

	scripts := func() int {
		n := 0
		for _, s := range cl.Servers {
			n += scriptCalls(t, s.Client(t))
		}
		return n
	}
	x := acquiredAt(t, ctx, e.client().MultiMutex(names).Lock)
	y := acquiredAt(t, ctx, e.client().MultiMutex(names).Lock)
	time.Sleep(300 * time.Millisecond) // both wait
	before := scripts()
	time.Sleep(time.Second)
	n := scripts() - before
	t.Logf("%d scripts in 1s while both waited", n)
	if n > 20 {
		t.Fatalf("%d scripts ran in 1s while two MultiMutexes waited for a held name: they poll each other", n)
	}
	if err := blocker.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	for _, got := range []<-chan time.Time{x, y} {
		select {
		case at := <-got:
			if at.IsZero() {
				t.Fatal("a waiter failed")
			}
		case <-time.After(10 * time.Second):
			t.Fatal("a waiter did not get the set after the Mutex's Unlock")
		}
	}
}
