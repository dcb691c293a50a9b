package main

import (
	"context"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// The tests of the lock kinds: the test process holds and waits for FairMutex, RWMutex
// and Semaphore leases with the library; the dlock binary describes and removes them.

// lib is a dlock Client of the test process. Its waits run in goroutines (see lock) that
// the test's cleanup ends, and then closes the Client.
type lib struct {
	t      *testing.T
	c      *dlock.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newLib(t *testing.T, rdb redis.UniversalClient) *lib {
	t.Helper()
	l := &lib{t: t, c: dlock.New(rdb)}
	l.ctx, l.cancel = context.WithTimeout(context.Background(), runTimeout)
	t.Cleanup(func() {
		l.cancel()
		l.wg.Wait()
		_ = l.c.Close()
	})
	return l
}

// acquired is how a wait of lock ended.
type acquired struct {
	lease *dlock.Lease
	err   error
	at    time.Time
}

// lock runs take in a goroutine with the lib's context; its result arrives on the channel.
func (l *lib) lock(take func(ctx context.Context) (*dlock.Lease, error)) <-chan acquired {
	ch := make(chan acquired, 1)
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		lease, err := take(l.ctx)
		ch <- acquired{lease, err, time.Now()}
	}()
	return ch
}

// now takes a lease at once, failing the test if it cannot.
func (l *lib) now(take func(ctx context.Context) (*dlock.Lease, error)) *dlock.Lease {
	l.t.Helper()
	lease, err := take(l.ctx)
	if err != nil {
		l.t.Fatal(err)
	}
	return lease
}

// await waits for the result of lock, failing the test unless it acquired within 10s.
func await(t *testing.T, ch <-chan acquired, what string) acquired {
	t.Helper()
	select {
	case a := <-ch:
		if a.err != nil {
			t.Fatalf("%s: %v", what, a.err)
		}
		return a
	case <-time.After(10 * time.Second):
		t.Fatalf("%s: not acquired within 10s", what)
	}
	return acquired{}
}

// pending fails the test if the wait of lock has ended.
func pending(t *testing.T, ch <-chan acquired, what string) {
	t.Helper()
	select {
	case a := <-ch:
		t.Fatalf("%s: the wait ended early: %+v", what, a)
	default:
	}
}

// listener subscribes to channels (SSUBSCRIBE on a Cluster) before an unlock, to check
// what it publishes.
type listener struct {
	ps   *redis.PubSub
	ch   <-chan *redis.Message
	seen map[string]bool // channel+" "+payload
}

func listen(t *testing.T, rdb redis.UniversalClient, channels ...string) *listener {
	t.Helper()
	ctx := context.Background()
	var ps *redis.PubSub
	if cc, ok := rdb.(*redis.ClusterClient); ok {
		ps = cc.SSubscribe(ctx, channels...)
	} else {
		ps = rdb.Subscribe(ctx, channels...)
	}
	t.Cleanup(func() { _ = ps.Close() })
	for range channels {
		if _, err := ps.ReceiveTimeout(ctx, 5*time.Second); err != nil { // the confirmation
			t.Fatal(err)
		}
	}
	return &listener{ps: ps, ch: ps.Channel(), seen: map[string]bool{}}
}

// heard waits for a message on channel.
func (l *listener) heard(t *testing.T, channel, payload string) {
	t.Helper()
	timeout := time.After(5 * time.Second)
	for !l.seen[channel+" "+payload] {
		select {
		case m := <-l.ch:
			l.seen[m.Channel+" "+m.Payload] = true
		case <-timeout:
			t.Fatalf("nothing published on %s", channel)
		}
	}
}

// lockStatus runs status --json for one lock and returns its only row.
func lockStatus(t *testing.T, env []string, args ...string) lockInfo {
	t.Helper()
	infos := statusJSON(t, env, append([]string{"status"}, args...)...)
	if len(infos) != 1 {
		t.Fatalf("status %v: want one row, got %+v", args, infos)
	}
	return infos[0]
}

func unlockJSON(t *testing.T, env []string, code int, args ...string) []unlockResult {
	t.Helper()
	r := runBin(t, env, append([]string{"unlock", "--force", "--json"}, args...)...)
	expect(t, r, code)
	var results []unlockResult
	if err := json.Unmarshal([]byte(r.stdout), &results); err != nil {
		t.Fatalf("not JSON: %v\n%v", err, r)
	}
	return results
}

func eq(p *int64, want int64) bool { return p != nil && *p == want }

// ttlWithin reports whether the TTL is in (0, max].
func ttlWithin(p *int64, max time.Duration) bool {
	return p != nil && *p > 0 && *p <= max.Milliseconds()
}

func get(t *testing.T, rdb redis.Cmdable, key string) string {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Result()
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// waitLen waits until the list or sorted set key has n entries.
func waitLen(t *testing.T, rdb redis.Cmdable, key string, n int64) {
	t.Helper()
	ctx := context.Background()
	waitFor(t, 10*time.Second, key+" to have "+strconv.FormatInt(n, 10)+" entries", func() bool {
		switch rdb.Type(ctx, key).Val() {
		case "list":
			return rdb.LLen(ctx, key).Val() == n
		case "zset":
			return rdb.ZCard(ctx, key).Val() == n
		}
		return n == 0
	})
}

// TestKindFair: a FairMutex held with two waiters queued shows as "fair" with its queue;
// unlock --force tells the first waiter on its Client's channel, and the queue keeps its order.
func TestKindFair(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	env := []string{"DLOCK_REDIS=" + serverURL(srv)}
	l := newLib(t, rdb)
	fm := l.c.FairMutex("fq", dlock.TTL(20*time.Second))
	holder := l.now(fm.Lock)
	first := l.lock(fm.Lock)
	waitLen(t, rdb, "{dlock:fq}:queue", 1)
	second := l.lock(fm.Lock)
	waitLen(t, rdb, "{dlock:fq}:queue", 2)
	token := get(t, rdb, "dlock:fq")
	head := rdb.LIndex(context.Background(), "{dlock:fq}:queue", 0).Val()
	// A free FairMutex that no one waits for is a free lock.
	l.now(l.c.FairMutex("fq-free").Lock).Unlock(context.Background())

	in := lockStatus(t, env, "fq")
	if in.Kind != "fair" || !in.Held || in.Holder != token || in.Fence != holder.Token() || !ttlWithin(in.TTLms, 20*time.Second) ||
		in.Waiters != 2 || !eq(in.Queue, 2) || in.Readers != nil || in.Holders != nil || in.Mode != "" {
		t.Fatalf("status of a FairMutex with two waiters: %+v", in)
	}
	expect(t, runBin(t, env, "status", "fq"), 0, "fair", token, "WAITERS", "DETAIL")
	if got := names(statusJSON(t, env, "list")); !slices.Equal(got, []string{"fq"}) {
		t.Fatalf("list: %q; want the FairMutex once, without its queue", got)
	}
	if free := lockStatus(t, env, "fq-free"); free.Held || free.Kind != "" || free.Queue != nil {
		t.Fatalf("a free FairMutex: %+v", free)
	}

	// unlock --force removes the holder and tells the head of the queue on its Client's
	// channel (its id: the token's first 16 digits).
	ls := listen(t, rdb, "{dlock:fq}:granted:"+head[:16], "{dlock:fq}:released")
	r := runBin(t, env, "unlock", "--force", "fq")
	expect(t, r, 0, `removed the lock "fq" (a FairMutex)`, "holder token "+token, "first live waiter", "Client's channel")
	ls.heard(t, "{dlock:fq}:granted:"+head[:16], "granted")
	ls.heard(t, "{dlock:fq}:released", "released")
	a := await(t, first, "the first waiter")
	pending(t, second, "the second waiter")
	if a.lease.Token() != holder.Token()+1 {
		t.Fatalf("the first waiter's token %d, want %d", a.lease.Token(), holder.Token()+1)
	}
	in = lockStatus(t, env, "fq")
	if in.Kind != "fair" || in.Holder != head || in.Waiters != 1 {
		t.Fatalf("status after the unlock: %+v; want the first waiter %s holding, one waiter", in, head)
	}
	if err := a.lease.Unlock(context.Background()); err != nil {
		t.Fatal(err)
	}
	b := await(t, second, "the second waiter")
	if b.lease.Token() != holder.Token()+2 {
		t.Fatalf("the second waiter's token %d, want %d", b.lease.Token(), holder.Token()+2)
	}
	// With its queue empty, a FairMutex looks like a mutex.
	results := unlockJSON(t, env, 0, "fq")
	if len(results) != 1 || !results[0].Removed || results[0].Kind != "mutex" || results[0].QueueHead != "" || results[0].TTLms == nil {
		t.Fatalf("unlock --json of a FairMutex no one waits for: %+v", results)
	}
	// Another process can take it again.
	other := newLib(t, rdb)
	other.now(other.c.FairMutex("fq").TryLock)
}

// TestKindRW: an RWMutex held by readers, with a writer waiting, is listed from its readers
// set; unlock --force removes the readers only with --readers, and the writer then gets in.
func TestKindRW(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	ctx := context.Background()
	env := []string{"DLOCK_REDIS=" + serverURL(srv)}
	l := newLib(t, rdb)
	rw := l.c.RWMutex("doc", dlock.TTL(20*time.Second))
	l.now(rw.RLock)
	l.now(rw.RLock)
	writer := l.lock(rw.Lock)
	waitLen(t, rdb, "{dlock:doc}:writers", 1)
	// The same with a hash tag in the name, whose readers set is "dlock:{grp}:doc:readers".
	l.now(l.c.RWMutex("{grp}:doc", dlock.TTL(20*time.Second)).RLock)

	in := lockStatus(t, env, "doc")
	if in.Kind != "rw" || in.Mode != "read" || !in.Held || in.Holder != "" || !eq(in.Readers, 2) || !eq(in.WritersWaiting, 1) ||
		!ttlWithin(in.TTLms, 20*time.Second) || in.Fence != 2 || in.Queue != nil || in.Holders != nil {
		t.Fatalf("status of an RWMutex with two readers and a waiting writer: %+v", in)
	}
	expect(t, runBin(t, env, "status", "doc"), 0, "rw", "read, 2 readers, 1 writer waiting")
	for pattern, want := range map[string][]string{
		"*": {"doc", "{grp}:doc"}, "do?": {"doc"}, "{grp}:d*": {"{grp}:doc"}, "{grp}:do[c]": {"{grp}:doc"}, "doc:*": nil,
	} {
		if got := names(statusJSON(t, env, "list", pattern)); !slices.Equal(got, want) {
			t.Errorf("list %s: %q, want %q", pattern, got, want)
		}
	}
	if got := names(statusJSON(t, env, "list", "--prefix", "", "*doc*")); !slices.Equal(got, []string{"dlock:doc", "dlock:{grp}:doc"}) {
		t.Errorf("list --prefix '': %q", got)
	}

	// Without --readers, nothing is removed.
	expect(t, runBin(t, env, "unlock", "--force", "doc"), exitFailure, `"doc" is an RWMutex held by 2 readers`, "dlock unlock --force --readers doc")
	if n := rdb.ZCard(ctx, "{dlock:doc}:readers").Val(); n != 2 {
		t.Fatalf("%d readers left, want 2", n)
	}
	pending(t, writer, "the writer")
	ls := listen(t, rdb, "{dlock:doc}:released")
	expect(t, runBin(t, env, "unlock", "--force", "--readers", "doc"), 0, `removed the readers (2 live, the last lease had`, "an RWMutex", "Waiters were woken")
	ls.heard(t, "{dlock:doc}:released", "released")
	w := await(t, writer, "the writer")
	if keyExists(rdb, "{dlock:doc}:readers") {
		t.Fatal("the readers set is still there")
	}

	// A writer alone, no reader and no writer waiting: the write lock key, and the
	// writers set with the served writer's tombstone (for 10 s), so it shows as an
	// RWMutex still.
	token := get(t, rdb, "dlock:doc")
	in = lockStatus(t, env, "doc")
	if in.Kind != "rw" || in.Holder != token || !ttlWithin(in.TTLms, 20*time.Second) || in.Fence != w.lease.Token() || (in.Readers != nil && *in.Readers != 0) {
		t.Fatalf("status of the writer: %+v", in)
	}
	// A downgrade: the writer takes a read lease too. unlock --force removes nothing
	// without --readers, and says so.
	l.now(func(context.Context) (*dlock.Lease, error) { return rw.RLock(w.lease.Context()) })
	in = lockStatus(t, env, "doc")
	if in.Kind != "rw" || in.Mode != "write" || in.Holder != token || !eq(in.Readers, 1) || !eq(in.WritersWaiting, 0) ||
		!ttlWithin(in.TTLms, 20*time.Second) || in.Fence != w.lease.Token()+1 {
		t.Fatalf("status of the writer with a reader: %+v", in)
	}
	expect(t, runBin(t, env, "status", "doc"), 0, "write, 1 reader")
	results := unlockJSON(t, env, exitFailure, "doc")
	if len(results) != 1 || results[0].Removed || results[0].Kind != "rw" || results[0].Holder != token ||
		!eq(results[0].Readers, 1) || results[0].ReadersRemoved || results[0].TTLms != nil {
		t.Fatalf("unlock --json of a writer with a reader: %+v", results)
	}
	in = lockStatus(t, env, "doc")
	if in.Mode != "write" || !eq(in.Readers, 1) || in.Holder != token {
		t.Fatalf("status after a refused unlock: %+v", in)
	}
	results = unlockJSON(t, env, 0, "--readers", "doc", "{grp}:doc")
	if len(results) != 2 || !results[0].Removed || !results[0].ReadersRemoved || !eq(results[0].Readers, 1) || results[0].Holder != token ||
		!results[1].Removed || !results[1].ReadersRemoved {
		t.Fatalf("unlock --readers --json: %+v", results)
	}
	expect(t, runBin(t, env, "unlock", "--force", "doc"), 0, `the lock "doc" was not held`)
	other := newLib(t, rdb)
	other.now(other.c.RWMutex("doc").TryLock) // another process can take it again
}

// TestKindSemaphore: a Semaphore with two holders and a request queued shows its permits;
// unlock --force removes its holders but not its queue, and the queued request gets in.
func TestKindSemaphore(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	env := []string{"DLOCK_REDIS=" + serverURL(srv)}
	l := newLib(t, rdb)
	sem := l.c.Semaphore("pool", 5, dlock.TTL(20*time.Second))
	take := func(n int64) func(context.Context) (*dlock.Lease, error) {
		return func(ctx context.Context) (*dlock.Lease, error) { return sem.Acquire(ctx, n) }
	}
	l.now(take(2))
	l.now(take(2))
	waiter := l.lock(take(3))
	waitLen(t, rdb, "{dlock:pool}:queue", 1)

	in := lockStatus(t, env, "pool")
	if in.Kind != "semaphore" || !in.Held || in.Holder != "" || !eq(in.Holders, 2) || !eq(in.PermitsInUse, 4) ||
		in.Waiters != 1 || !eq(in.Queue, 1) || !ttlWithin(in.TTLms, 20*time.Second) || in.Fence != 2 || in.Readers != nil {
		t.Fatalf("status of a Semaphore with two holders and a waiter: %+v", in)
	}
	expect(t, runBin(t, env, "status", "pool"), 0, "semaphore", "in use 4 by 2 holders")
	if got := names(statusJSON(t, env, "list")); !slices.Equal(got, []string{"pool"}) {
		t.Fatalf("list: %q; want the Semaphore once, without its permits and queue", got)
	}

	ls := listen(t, rdb, "{dlock:pool}:released")
	r := runBin(t, env, "unlock", "--force", "pool")
	expect(t, r, 0, `removed the holders of "pool" (a Semaphore): 2 holders with 4 permits in use, the first lease had`,
		"the queue and the fencing counter were kept")
	ls.heard(t, "{dlock:pool}:released", "released")
	a := await(t, waiter, "the queued request")
	if a.lease.Token() != 3 || get(t, rdb, "{dlock:pool}:fence") != "3" {
		t.Fatalf("the queued request's token %d, want 3", a.lease.Token())
	}
	in = lockStatus(t, env, "pool")
	if !eq(in.Holders, 1) || !eq(in.PermitsInUse, 3) || in.Waiters != 0 || !eq(in.Queue, 0) {
		t.Fatalf("status after the unlock: %+v", in)
	}
	results := unlockJSON(t, env, 0, "pool")
	if len(results) != 1 || !results[0].Removed || results[0].Kind != "semaphore" || !eq(results[0].Holders, 1) ||
		!eq(results[0].PermitsInUse, 3) || results[0].TTLms == nil {
		t.Fatalf("unlock --json of a Semaphore: %+v", results)
	}
	other := newLib(t, rdb)
	other.now(func(ctx context.Context) (*dlock.Lease, error) { // every permit is free again
		return other.c.Semaphore("pool", 5).TryAcquire(ctx, 5)
	})
}

// TestKindsCluster: a FairMutex and an RWMutex on a 3-master Cluster: status and list
// describe them; unlock --force wakes their waiters with SPUBLISH.
func TestKindsCluster(t *testing.T) {
	t.Parallel()
	cl := redistest.StartCluster(t, 3)
	cc := cl.Client(t)
	env := []string{"DLOCK_REDIS=redis://" + cl.Addrs[0]}
	l := newLib(t, cc)

	rw := l.c.RWMutex("c-doc", dlock.TTL(20*time.Second))
	l.now(rw.RLock)
	writer := l.lock(rw.Lock)
	waitLen(t, cc, "{dlock:c-doc}:writers", 1)
	fm := l.c.FairMutex("c-fair", dlock.TTL(20*time.Second))
	l.now(fm.Lock)
	waiter := l.lock(fm.Lock)
	waitLen(t, cc, "{dlock:c-fair}:queue", 1)
	// Other locks, spread over the masters.
	var want []string
	for i := range 8 {
		name := "c-" + strconv.Itoa(i)
		want = append(want, name)
		sem := l.c.Semaphore(name, 2, dlock.TTL(20*time.Second))
		l.now(func(ctx context.Context) (*dlock.Lease, error) { return sem.TryAcquire(ctx, 1) })
	}
	want = append(want, "c-doc", "c-fair")
	slices.Sort(want)
	if got := names(statusJSON(t, env, "list", "--cluster", "c-*")); !slices.Equal(got, want) {
		t.Fatalf("list on a cluster: %q, want %q", got, want)
	}

	in := lockStatus(t, env, "--cluster", "c-doc")
	if in.Kind != "rw" || in.Mode != "read" || !eq(in.Readers, 1) || !eq(in.WritersWaiting, 1) {
		t.Fatalf("status of an RWMutex on a cluster: %+v", in)
	}
	in = lockStatus(t, env, "--cluster", "c-fair")
	if in.Kind != "fair" || in.Waiters != 1 {
		t.Fatalf("status of a FairMutex on a cluster: %+v", in)
	}
	in = lockStatus(t, env, "--cluster", "c-3")
	if in.Kind != "semaphore" || !eq(in.Holders, 1) || !eq(in.PermitsInUse, 1) {
		t.Fatalf("status of a Semaphore on a cluster: %+v", in)
	}

	expect(t, runBin(t, env, "unlock", "--cluster", "--force", "--readers", "c-doc"), 0, "removed the readers (1 live")
	await(t, writer, "the writer")
	head := cc.LIndex(context.Background(), "{dlock:c-fair}:queue", 0).Val()
	ls := listen(t, cc, "{dlock:c-fair}:granted:"+head[:16])
	expect(t, runBin(t, env, "unlock", "--cluster", "--force", "c-fair"), 0, "(a FairMutex)", "Client's channel")
	ls.heard(t, "{dlock:c-fair}:granted:"+head[:16], "granted")
	await(t, waiter, "the fair waiter")
	expect(t, runBin(t, env, "unlock", "--cluster", "--force", "c-3"), 0, "a Semaphore", "1 holder with 1 permit in use")
	if in := lockStatus(t, env, "--cluster", "c-3"); in.Held || in.Kind != "" {
		t.Fatalf("the semaphore's holders are still there: %+v", in)
	}
	other := newLib(t, cc)
	other.now(func(ctx context.Context) (*dlock.Lease, error) { return other.c.Semaphore("c-3", 2).TryAcquire(ctx, 2) })
}

// TestKindsQuorum: a Semaphore on a quorum shows on every server; its waiters do not
// queue there, so WAITERS counts subscribed processes; unlock --force removes it on each.
func TestKindsQuorum(t *testing.T) {
	t.Parallel()
	nodes := redistest.StartNodes(t, 3)
	var rdbs []redis.UniversalClient
	var urls []string
	for _, n := range nodes {
		rdbs = append(rdbs, n.Client(t))
		urls = append(urls, serverURL(n))
	}
	env := []string{"DLOCK_REDIS=" + strings.Join(urls, ",")}
	c, err := dlock.NewQuorum(rdbs)
	if err != nil {
		t.Fatal(err)
	}
	l := &lib{t: t, c: c}
	l.ctx, l.cancel = context.WithTimeout(context.Background(), runTimeout)
	t.Cleanup(func() {
		l.cancel()
		l.wg.Wait()
		_ = l.c.Close()
	})
	sem := c.Semaphore("qs", 2, dlock.TTL(20*time.Second))
	l.now(func(ctx context.Context) (*dlock.Lease, error) { return sem.Acquire(ctx, 2) })
	waiter := l.lock(func(ctx context.Context) (*dlock.Lease, error) { return sem.Acquire(ctx, 1) })
	waitFor(t, 10*time.Second, "the waiter to subscribe", func() bool { return numSub(nodes[0].Client(t), "{dlock:qs}:released") >= 1 })

	infos := statusJSON(t, env, "status", "qs")
	if len(infos) != 3 {
		t.Fatalf("want a row per server: %+v", infos)
	}
	for i, in := range infos {
		if in.Node != nodes[i].Addr || in.Kind != "semaphore" || !eq(in.Holders, 1) || !eq(in.PermitsInUse, 2) || in.Waiters < 1 {
			t.Fatalf("status of a Semaphore on a quorum, server %d: %+v", i, in)
		}
	}
	r := runBin(t, env, "unlock", "--force", "qs")
	expect(t, r, 0, "on "+nodes[2].Addr)
	if n := strings.Count(r.stdout, "1 holder with 2 permits in use"); n != 3 {
		t.Fatalf("removed on %d servers, want 3: %v", n, r)
	}
	await(t, waiter, "the waiter")
}
