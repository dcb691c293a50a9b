package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// legacyClient is a client of the SETNX + GETSET timestamp protocol written from the
// recipe, as the other services of a system that locks this way run it: plain commands,
// no scripts, deadlines from its own clock. skew is how far its clock is ahead of the
// real one.
type legacyClient struct {
	rdb  *redis.Client
	key  string
	ttl  time.Duration
	skew time.Duration
}

func (c legacyClient) now() int64 { return time.Now().Add(c.skew).UnixMilli() }

// tryLock is one round of the recipe. It returns the deadline it wrote and whether it
// holds the lock; a client that lost the GETSET race has written its deadline all the
// same (lostRace).
func (c legacyClient) tryLock(ctx context.Context) (deadline int64, ok, lostRace bool, err error) {
	deadline = c.now() + c.ttl.Milliseconds()
	if ok, err = c.rdb.SetNX(ctx, c.key, deadline, 0).Result(); err != nil || ok {
		return deadline, ok, false, err
	}
	held, err := c.rdb.Get(ctx, c.key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0, false, false, nil // released meanwhile: the next round takes it
	}
	if err != nil || held >= c.now() {
		return 0, false, false, err // held: its deadline has not passed
	}
	return c.getSet(ctx)
}

// getSet is the recipe's GETSET step, for a client that found the deadline passed.
func (c legacyClient) getSet(ctx context.Context) (deadline int64, ok, lostRace bool, err error) {
	deadline = c.now() + c.ttl.Milliseconds()
	// GETSET itself, as the recipe has it (go-redis deprecates its method for SET GET).
	old, err := c.rdb.Do(ctx, "GETSET", c.key, deadline).Int64()
	switch {
	case errors.Is(err, redis.Nil):
		return deadline, true, false, nil // the key was free: no one else holds it
	case err != nil:
		return 0, false, false, err
	case old < c.now():
		return deadline, true, false, nil
	}
	return deadline, false, true, nil // someone took it first; its deadline is now ours
}

// lock runs rounds of the recipe until it holds the lock or ctx ends.
func (c legacyClient) lock(ctx context.Context) (int64, error) {
	for {
		deadline, ok, _, err := c.tryLock(ctx)
		if ok || err != nil {
			return deadline, err
		}
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-time.After(time.Millisecond):
		}
	}
}

// unlock is the recipe's release: DEL, but only while its own deadline has not passed.
func (c legacyClient) unlock(ctx context.Context, deadline int64) error {
	if c.now() < deadline {
		return c.rdb.Del(ctx, c.key).Err()
	}
	return nil
}

// keyDeadline reads the deadline the key holds; 0 when there is no key.
func keyDeadline(t *testing.T, rdb *redis.Client, key string) int64 {
	t.Helper()
	v, err := rdb.Get(context.Background(), key).Int64()
	if errors.Is(err, redis.Nil) {
		return 0
	}
	if err != nil {
		t.Fatalf("GET %s: %v", key, err)
	}
	return v
}

// sharedCounter is a counter in Redis incremented with a non-atomic GET and SET, which
// only mutual exclusion keeps exact; it counts the times a holder entered while another
// was inside.
type sharedCounter struct {
	rdb              *redis.Client
	key              string
	inside, overlaps atomic.Int32
}

func (c *sharedCounter) increment(ctx context.Context) error {
	if c.inside.Add(1) != 1 {
		c.overlaps.Add(1)
	}
	defer c.inside.Add(-1)
	n, err := c.rdb.Get(ctx, c.key).Int()
	if err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	time.Sleep(time.Millisecond) // widen the window a second holder would need
	return c.rdb.Set(ctx, c.key, n+1, 0).Err()
}

// incrementWithDlock increments counter rounds times under m, counting each in done.
func incrementWithDlock(t *testing.T, ctx context.Context, m *dlock.TimestampMutex, counter *sharedCounter, rounds int, done *atomic.Int32) {
	for range rounds {
		if err := m.Do(ctx, counter.increment); err != nil {
			t.Errorf("dlock: %v", err)
			return
		}
		done.Add(1)
	}
}

// incrementWithRecipe increments counter rounds times under the reference client's lock,
// counting each in done.
func incrementWithRecipe(t *testing.T, ctx context.Context, c legacyClient, counter *sharedCounter, rounds int, done *atomic.Int32) {
	for range rounds {
		deadline, err := c.lock(ctx)
		if err == nil {
			err = counter.increment(ctx)
		}
		if err == nil {
			err = c.unlock(ctx, deadline)
		}
		if err != nil {
			t.Errorf("reference client: %v", err)
			return
		}
		done.Add(1)
	}
}

// TestTimestampMutexExactCounter: dlock TimestampMutexes of several clients and
// goroutines of the reference client take turns incrementing a counter with a
// non-atomic GET and SET: the count comes out exact, and no two holders ever overlap.
func TestTimestampMutexExactCounter(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 90*time.Second)
	const key, rounds = "legacy-job", 25
	counter := &sharedCounter{rdb: rdb, key: "legacy-job-count"}
	var wg sync.WaitGroup
	var byDlock, byLegacy atomic.Int32
	for range 3 {
		c := newClient(t, rdb, dlock.WithPrefix(""))
		for range 2 {
			wg.Go(func() {
				incrementWithDlock(t, ctx, c.TimestampMutex(key, dlock.TTL(5*time.Second)), counter, rounds, &byDlock)
			})
		}
	}
	for range 4 {
		wg.Go(func() {
			incrementWithRecipe(t, ctx, legacyClient{rdb: rdb, key: key, ttl: 5 * time.Second}, counter, rounds, &byLegacy)
		})
	}
	wg.Wait()
	got, err := rdb.Get(ctx, counter.key).Int()
	if err != nil {
		t.Fatal(err)
	}
	if want := int(byDlock.Load() + byLegacy.Load()); got != want || want != 10*rounds {
		t.Errorf("counter = %d after %d dlock and %d reference increments, want %d", got, byDlock.Load(), byLegacy.Load(), 10*rounds)
	}
	if n := counter.overlaps.Load(); n > 0 {
		t.Errorf("%d times a holder entered while another was inside", n)
	}
	if n, _ := rdb.Exists(ctx, key).Result(); n != 0 {
		t.Errorf("the lock key is left behind after every holder unlocked")
	}
}

// TestTimestampMutexExcludesLegacyClients: a deadline the reference client wrote keeps a
// dlock TimestampMutex out, and its DEL lets the waiter in promptly (the bounded
// re-check; the TTL is 30s); a dlock holder keeps the reference client out, and its
// Unlock lets it in.
func TestTimestampMutexExcludesLegacyClients(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 30*time.Second)
	legacy := legacyClient{rdb: rdb, key: "shared", ttl: 30 * time.Second}
	m := newClient(t, rdb, dlock.WithPrefix("")).TimestampMutex("shared")

	deadline, err := legacy.lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("TryLock while the reference client holds: %v, want ErrNotAcquired", err)
	}
	got := acquiredAt(t, ctx, m.Lock)
	time.Sleep(300 * time.Millisecond)
	released := time.Now()
	if err := legacy.unlock(ctx, deadline); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-got:
		if at.IsZero() {
			t.Fatal("Lock failed")
		}
		if wait := at.Sub(released); wait > time.Second {
			t.Errorf("the waiter got the lock %v after the reference client's DEL, want well under its 30s TTL", wait)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the waiter did not get the lock within 10s of the reference client's DEL")
	}

	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if v := keyDeadline(t, rdb, "shared"); v < time.Now().Add(29*time.Second).UnixMilli() {
		t.Errorf("the key holds %d, want a unix-ms deadline about 30s ahead", v)
	}
	if _, ok, _, err := legacy.tryLock(ctx); ok || err != nil {
		t.Fatalf("the reference client took the lock from a dlock holder (ok %v, err %v)", ok, err)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if _, ok, _, err := legacy.tryLock(ctx); !ok || err != nil {
		t.Fatalf("the reference client did not get the lock after Unlock (ok %v, err %v)", ok, err)
	}
}

// TestTimestampMutexWaitsForDeadline: a reference client that died holding the lock
// (a deadline 500ms ahead, no expiry on the key) keeps a waiter out until its deadline
// passes, and no longer.
func TestTimestampMutexWaitsForDeadline(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	deadline := time.Now().Add(500 * time.Millisecond)
	if err := rdb.Set(ctx, "crashed", deadline.UnixMilli(), 0).Err(); err != nil {
		t.Fatal(err)
	}
	l, err := newClient(t, rdb, dlock.WithPrefix("")).TimestampMutex("crashed").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Unlock(ctx)
	if at := time.Now(); at.Before(deadline) || at.After(deadline.Add(5*time.Second)) {
		t.Errorf("acquired %v after the dead holder's deadline, want within [0, 5s]", at.Sub(deadline))
	}
}

// TestTimestampMutexRenews: a lease of 1s held for 2.5s stays held, its deadline moves
// forward, and the reference client is kept out all along.
func TestTimestampMutexRenews(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	l, err := newClient(t, rdb, dlock.WithPrefix("")).TimestampMutex("renewed", dlock.TTL(time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	first := keyDeadline(t, rdb, "renewed")
	legacy := legacyClient{rdb: rdb, key: "renewed", ttl: time.Second}
	for end := time.Now().Add(2500 * time.Millisecond); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, ok, _, err := legacy.tryLock(ctx); ok || err != nil {
			t.Fatalf("the reference client took a renewed lock (ok %v, err %v)", ok, err)
		}
	}
	if err := l.Err(); err != nil {
		t.Fatalf("lease ended while renewed: %v", err)
	}
	if last := keyDeadline(t, rdb, "renewed"); last < first+1500 {
		t.Errorf("deadline moved from %d to %d in 2.5s of renewals, want at least 1.5s later", first, last)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if v := keyDeadline(t, rdb, "renewed"); v != 0 {
		t.Errorf("Unlock left the key holding %d", v)
	}
}

// TestTimestampMutexExtend: Extend rewrites the deadline and the expiry when it lengthens
// the lease; one that shortens it moves ValidUntil down and leaves the key as it was (a
// request that lands late must not cut a key that a later one lengthened); Close releases
// what the Client still holds.
func TestTimestampMutexExtend(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	c := dlock.New(rdb, dlock.WithPrefix(""))
	l, err := c.TimestampMutex("ext").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ ttl, key time.Duration }{{time.Minute, time.Minute}, {2 * time.Second, time.Minute}} {
		start := time.Now()
		if err := l.Extend(ctx, tc.ttl); err != nil {
			t.Fatalf("Extend(%v): %v", tc.ttl, err)
		}
		v, pttl := keyDeadline(t, rdb, "ext"), rdb.PTTL(ctx, "ext").Val()
		if v < start.Add(tc.key-time.Second).UnixMilli() || v > time.Now().Add(tc.key).UnixMilli() || pttl > tc.key || pttl < tc.key-time.Second {
			t.Errorf("after Extend(%v): deadline %v ahead, expiry %v; want both about %v", tc.ttl, time.Until(time.UnixMilli(v)), pttl, tc.key)
		}
		if left := time.Until(l.ValidUntil()); left > tc.ttl {
			t.Errorf("after Extend(%v): ValidUntil %v ahead", tc.ttl, left)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if l.Err() != dlock.ErrReleased || keyDeadline(t, rdb, "ext") != 0 {
		t.Errorf("after Close: lease %v, key %d; want released and gone", l.Err(), keyDeadline(t, rdb, "ext"))
	}
}

// TestTimestampMutexReleasesOnlyItsOwn: once another client's deadline is in the key,
// Unlock deletes nothing and says the lease was not held.
func TestTimestampMutexReleasesOnlyItsOwn(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	l, err := newClient(t, rdb, dlock.WithPrefix("")).TimestampMutex("own").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := time.Now().Add(time.Minute).UnixMilli()
	if err := rdb.Set(ctx, "own", other, 0).Err(); err != nil { // what another client's GETSET leaves
		t.Fatal(err)
	}
	if err := l.Unlock(ctx); !errors.Is(err, dlock.ErrNotHeld) {
		t.Errorf("Unlock of a key that holds another's deadline: %v, want ErrNotHeld", err)
	}
	if l.Err() != dlock.ErrLost {
		t.Errorf("lease Err = %v, want ErrLost", l.Err())
	}
	if v := keyDeadline(t, rdb, "own"); v != other {
		t.Errorf("the key holds %d after Unlock, want the other client's %d untouched", v, other)
	}
}

// releaseHook is a go-redis hook that, once armed, holds up the next call of script (a
// release): on its way to the server, or, with after, its reply on the way back. It
// closes sent and waits for resume (5s at most).
type releaseHook struct {
	script       *redis.Script
	after        bool
	armed        atomic.Bool
	sent, resume chan struct{}
}

func newReleaseHook(script *redis.Script, after bool) *releaseHook {
	return &releaseHook{script: script, after: after, sent: make(chan struct{}), resume: make(chan struct{})}
}

func (h *releaseHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *releaseHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		return h.around([]redis.Cmder{cmd}, func() error { return next(ctx, cmd) })
	}
}

func (h *releaseHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		return h.around(cmds, func() error { return next(ctx, cmds) })
	}
}

func (h *releaseHook) around(cmds []redis.Cmder, next func() error) error {
	if !slices.ContainsFunc(cmds, h.runs) || !h.armed.CompareAndSwap(true, false) {
		return next()
	}
	if !h.after {
		h.holdUp()
		return next()
	}
	err := next()
	h.holdUp()
	return err
}

func (h *releaseHook) runs(cmd redis.Cmder) bool {
	args := cmd.Args()
	if len(args) < 2 {
		return false
	}
	body, _ := args[1].(string)
	if strings.EqualFold(cmd.Name(), "eval") {
		body = redis.NewScript(body).Hash()
	}
	return body == h.script.Hash()
}

func (h *releaseHook) holdUp() {
	close(h.sent)
	select {
	case <-h.resume:
	case <-time.After(5 * time.Second):
	}
}

// gateFirstRenewal makes the first renewal batch of c, once it has taken its leases,
// close captured and wait (5s at most) for hook to hold up a release; once the batch's
// results are applied, the release goes on.
func gateFirstRenewal(c *dlock.Client, hook *releaseHook) (captured <-chan struct{}) {
	ch := make(chan struct{})
	var first atomic.Bool
	dlock.SetRenewCaptured(c, func() func() {
		if !first.CompareAndSwap(false, true) {
			return nil
		}
		close(ch)
		select {
		case <-hook.sent:
		case <-time.After(5 * time.Second):
		}
		return func() { close(hook.resume) }
	})
	return ch
}

// TestTimestampMutexUnlockOwnsLateRenewal: a renewal that took the lease before Unlock
// began, but makes its call after Unlock made the release's, and lands first (renewals go
// out on a pipeline of their own), writes nothing the release does not own: Unlock
// deletes the key and the lease is released, not lost with the key left locked for a TTL.
func TestTimestampMutexUnlockOwnsLateRenewal(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	hook := newReleaseHook(scripts.StampRelease, false)
	rdb.AddHook(hook)
	c := newClient(t, rdb, dlock.WithPrefix(""))
	captured := gateFirstRenewal(c, hook)
	// A TTL of 3s: the release waits up to a second for its reply.
	l, err := c.TimestampMutex("late", dlock.TTL(3*time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	waitClosed(t, captured, 10*time.Second, "the first renewal")
	hook.armed.Store(true)
	if err := l.Unlock(ctx); err != nil {
		t.Errorf("Unlock with a renewal landing before its release: %v", err)
	}
	if l.Err() != dlock.ErrReleased {
		t.Errorf("lease Err = %v, want ErrReleased", l.Err())
	}
	if v := keyDeadline(t, rdb, "late"); v != 0 {
		t.Errorf("Unlock left the key holding %d (%v ahead)", v, time.Until(time.UnixMilli(v)))
	}
}

// TestUnlockOutranksLateRenewal: a renewal that lands after Unlock's release and finds the
// key gone, while Unlock waits for the release's reply, does not make the lease lost:
// Unlock succeeds and the lease is released.
func TestUnlockOutranksLateRenewal(t *testing.T) {
	for _, tc := range []struct {
		kind    string
		release *redis.Script
		lock    func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error)
	}{
		{dlock.KindMutex, scripts.MutexRelease, func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) {
			return c.Mutex("late", dlock.TTL(3*time.Second)).Lock(ctx)
		}},
		{dlock.KindTimestamp, scripts.StampRelease, func(c *dlock.Client, ctx context.Context) (*dlock.Lease, error) {
			return c.TimestampMutex("late", dlock.TTL(3*time.Second)).Lock(ctx)
		}},
	} {
		t.Run(tc.kind, func(t *testing.T) {
			_, rdb := standalone(t)
			ctx := ctxTimeout(t, 20*time.Second)
			hook := newReleaseHook(tc.release, true)
			rdb.AddHook(hook)
			c := newClient(t, rdb)
			captured := gateFirstRenewal(c, hook)
			l, err := tc.lock(c, ctx)
			if err != nil {
				t.Fatal(err)
			}
			waitClosed(t, captured, 10*time.Second, "the first renewal")
			hook.armed.Store(true)
			if err := l.Unlock(ctx); err != nil {
				t.Errorf("Unlock: %v", err)
			}
			if l.Err() != dlock.ErrReleased {
				t.Errorf("lease Err = %v, want ErrReleased", l.Err())
			}
		})
	}
}

// TestTimestampMutexClockSkew shows the protocol's unsafety that TimestampMutex documents:
// a reference client whose clock is ahead by less than the TTL (3/4 of it), but by more
// than the time left until the key's deadline (2/3 of the TTL just before a renewal),
// takes the lock from a live dlock holder. The dlock lease learns it at its next renewal,
// and leaves the other client's deadline alone.
func TestTimestampMutexClockSkew(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 60*time.Second)
	const ttl = 1200 * time.Millisecond
	c := newClient(t, rdb, dlock.WithPrefix(""))
	// A takeover races a renewal only if the renewal lands between the fast client's GET
	// and its GETSET; then it lost the GETSET race, and the scenario runs again.
	for round := range 3 {
		key := "skewed-" + strconv.Itoa(round)
		l, err := c.TimestampMutex(key, dlock.TTL(ttl)).Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		fast := legacyClient{rdb: rdb, key: key, ttl: 10 * time.Second, skew: 3 * ttl / 4}
		deadline, taken, ok := takeWithSkew(t, ctx, fast, 3*ttl)
		if !ok {
			continue
		}
		if l.Err() != nil {
			t.Fatalf("the dlock lease ended before it could know: %v", l.Err())
		}
		waitClosed(t, l.Done(), 5*time.Second, "the lease learning of the takeover")
		if l.Err() != dlock.ErrLost {
			t.Errorf("lease Err = %v, want ErrLost", l.Err())
		}
		if d := time.Since(taken); d > ttl+time.Second {
			t.Errorf("the lease learned of the takeover after %v, want by its next renewal (TTL/3 = %v, plus slack)", d, ttl/3)
		}
		if v := keyDeadline(t, rdb, key); v != deadline {
			t.Errorf("the key holds %d, want the fast client's deadline %d", v, deadline)
		}
		return
	}
	t.Fatal("in 3 rounds, the fast client's takeover raced a renewal every time")
}

// takeWithSkew runs rounds of the recipe as c, whose clock is ahead, until it takes the
// lock (ok), loses a GETSET race, or within passes without a takeover (a failure: the
// unsafety TimestampMutex documents is not shown). It returns the deadline it wrote and
// when it took the lock.
func takeWithSkew(t *testing.T, ctx context.Context, c legacyClient, within time.Duration) (deadline int64, at time.Time, ok bool) {
	t.Helper()
	for end := time.Now().Add(within); time.Now().Before(end); time.Sleep(2 * time.Millisecond) {
		deadline, ok, lostRace, err := c.tryLock(ctx)
		switch {
		case err != nil:
			t.Fatal(err)
		case ok:
			return deadline, time.Now(), true
		case lostRace:
			return 0, time.Time{}, false
		}
	}
	t.Fatalf("a client with its clock %v ahead did not take the lock from a live holder within %v", c.skew, within)
	return 0, time.Time{}, false
}

// TestTimestampMutexGetSetRace shows the GETSET race that TimestampMutex documents: a
// reference client that saw a passed deadline, and lost the lock to dlock before its
// GETSET, still overwrites dlock's deadline with its own; the dlock lease is lost at its
// next renewal.
func TestTimestampMutexGetSetRace(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	if err := rdb.Set(ctx, "race", time.Now().Add(-time.Second).UnixMilli(), 0).Err(); err != nil {
		t.Fatal(err) // a passed deadline, which both clients see
	}
	l, err := newClient(t, rdb, dlock.WithPrefix("")).TimestampMutex("race", dlock.TTL(600*time.Millisecond)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	loser := legacyClient{rdb: rdb, key: "race", ttl: 10 * time.Second}
	deadline, ok, lost, err := loser.getSet(ctx) // it read the passed deadline before dlock's Lock
	if err != nil || ok || !lost {
		t.Fatalf("the reference client's GETSET: ok %v, lost the race %v, err %v; want it to lose the race", ok, lost, err)
	}
	if v := keyDeadline(t, rdb, "race"); v != deadline {
		t.Fatalf("the key holds %d, want the loser's deadline %d", v, deadline)
	}
	waitClosed(t, l.Done(), 5*time.Second, "the lease learning that its deadline was overwritten")
	if l.Err() != dlock.ErrLost {
		t.Errorf("lease Err = %v, want ErrLost", l.Err())
	}
}

// TestTimestampMutexKeys: under the default prefix the key is the prefix and the name,
// holding the deadline; the fencing counter is its companion and grows with each
// acquisition; Inspect reports the lock as a mutex held by its deadline.
func TestTimestampMutexKeys(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	c := newClient(t, rdb)
	m := c.TimestampMutex("job")
	var last uint64
	for i := range 3 {
		l, err := m.Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		v, err := rdb.Get(ctx, "dlock:job").Result()
		if err != nil {
			t.Fatal(err)
		}
		if d, err := strconv.ParseInt(v, 10, 64); err != nil || d < time.Now().Add(29*time.Second).UnixMilli() {
			t.Errorf("dlock:job holds %q, want a unix-ms deadline 30s ahead", v)
		}
		if pttl := rdb.PTTL(ctx, "dlock:job").Val(); pttl <= 0 || pttl > dlock.DefaultTTL {
			t.Errorf("dlock:job expires in %v, want within the TTL: the safety net of a crashed holder", pttl)
		}
		if fence, _ := rdb.Get(ctx, "{dlock:job}:fence").Uint64(); fence != l.Token() || l.Token() <= last {
			t.Errorf("acquisition %d: token %d, counter %d, previous token %d", i, l.Token(), fence, last)
		}
		last = l.Token()
		if i == 2 {
			in, err := c.Inspect(ctx, "job")
			if err != nil {
				t.Fatal(err)
			}
			if in.Kind != dlock.KindMutex || len(in.Holders) != 1 || in.Holders[0].Token != v {
				t.Errorf("Inspect: kind %q, holders %+v; want a mutex held by %q", in.Kind, in.Holders, v)
			}
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
}

// TestTimestampMutexWaitersQueueLocally: goroutines of one process that wait for a key a
// reference client holds queue locally, and only the first re-checks Redis; the
// reference client's DEL lets them all through in turn.
func TestTimestampMutexWaitersQueueLocally(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 30*time.Second)
	legacy := legacyClient{rdb: rdb, key: "queued", ttl: 30 * time.Second}
	deadline, err := legacy.lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	m := newClient(t, rdb, dlock.WithPrefix("")).TimestampMutex("queued")
	const waiters = 8
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			if err := m.Do(ctx, func(context.Context) error { return nil }); err != nil {
				t.Error(err)
			}
		})
	}
	time.Sleep(200 * time.Millisecond) // all queued
	before := scriptCalls(t, rdb)
	time.Sleep(time.Second)
	// One waiter re-checking at most every 100ms (after a back-off from 5ms) makes about
	// 15 calls in a second; each waiter on its own would make eight times that.
	if calls := scriptCalls(t, rdb) - before; calls > 40 {
		t.Errorf("%d waiters of one process ran %d scripts in 1s, want about one waiter's re-checks (~15)", waiters, calls)
	}
	if err := legacy.unlock(ctx, deadline); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
}

// TestTimestampMutexReentry: a Lock with a lease's context re-enters; TryLock of another
// caller of the same process is refused while it is held.
func TestTimestampMutexReentry(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	m := newClient(t, rdb).TimestampMutex("re")
	l, err := m.Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	in, err := m.Lock(l.Context())
	if err != nil || in.Token() != l.Token() {
		t.Fatalf("re-entry: %v, token %v, want the outer token %d", err, in, l.Token())
	}
	if _, err := m.TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("TryLock while held: %v, want ErrNotAcquired", err)
	}
	_ = in.Unlock(ctx)
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
}

// TestTimestampMutexKeyNotDeadline: a key that holds no unix-ms deadline, or another
// type, is an error that says what it holds and is left alone, promptly, whether trying
// or waiting.
func TestTimestampMutexKeyNotDeadline(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 30*time.Second)
	c := newClient(t, rdb, dlock.WithPrefix(""))
	for _, tc := range []struct {
		name  string
		value func(key string) error
		is    error
		want  []string
	}{
		{"text", func(k string) error { return rdb.Set(ctx, k, "hello", 0).Err() }, dlock.ErrNotTimestamp, []string{`"hello"`, "not a unix-ms deadline"}},
		{"seconds", func(k string) error { return rdb.Set(ctx, k, time.Now().Unix()+30, 0).Err() }, dlock.ErrNotTimestamp, []string{"looks like unix seconds"}},
		{"fraction", func(k string) error { return rdb.Set(ctx, k, "1700000000000.5", 0).Err() }, dlock.ErrNotTimestamp, []string{`"1700000000000.5"`}},
		{"binary", func(k string) error { return rdb.Set(ctx, k, "a\r\nb"+strings.Repeat("x", 60), 0).Err() }, dlock.ErrNotTimestamp, []string{`"a??bxxx`, `..."`}},
		{"hash", func(k string) error { return rdb.HSet(ctx, k, "f", "v").Err() }, nil, []string{"WRONGTYPE"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key := "bad-" + tc.name
			if err := tc.value(key); err != nil {
				t.Fatal(err)
			}
			before, _ := rdb.Dump(ctx, key).Result()
			m := c.TimestampMutex(key)
			for op, lock := range map[string]func(context.Context) (*dlock.Lease, error){"TryLock": m.TryLock, "Lock": m.Lock} {
				wantRefusedAtOnce(t, ctx, op, lock, tc.is, tc.want)
			}
			if after, _ := rdb.Dump(ctx, key).Result(); after != before {
				t.Errorf("the key changed")
			}
		})
	}
}

// wantRefusedAtOnce checks that lock fails within 2s with an error that wraps is (unless
// nil) and says each of want.
func wantRefusedAtOnce(t *testing.T, ctx context.Context, op string, lock func(context.Context) (*dlock.Lease, error), is error, want []string) {
	t.Helper()
	start := time.Now()
	_, err := lock(ctx)
	if err == nil || (is != nil && !errors.Is(err, is)) {
		t.Fatalf("%s: %v, want an error wrapping %v", op, err, is)
	}
	for _, w := range want {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("%s: %q does not say %q", op, err, w)
		}
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("%s took %v to refuse, want at once", op, d)
	}
}

// TestTimestampMutexBadArguments: a quorum Client, an empty name and a short TTL are
// refused with the reason, before any request (the nodes need not be there).
func TestTimestampMutexBadArguments(t *testing.T) {
	ctx := ctxTimeout(t, 30*time.Second)
	var nodes []redis.UniversalClient
	for _, addr := range []string{"127.0.0.1:1", "127.0.0.1:2", "127.0.0.1:3"} {
		rdb := redis.NewClient(&redis.Options{Addr: addr, MaxRetries: -1})
		t.Cleanup(func() { _ = rdb.Close() })
		nodes = append(nodes, rdb)
	}
	q := newQuorumClient(t, nodes)
	c := newClient(t, nodes[0], dlock.WithPrefix(""))
	for _, tc := range []struct {
		name string
		err  func() error
		want string
	}{
		{"quorum", func() error { _, err := q.TimestampMutex("x").Lock(ctx); return err }, "no owner token"},
		{"quorum try", func() error { _, err := q.TimestampMutex("x").TryLock(ctx); return err }, "single Redis deployment"},
		{"empty name", func() error { _, err := c.TimestampMutex("").Lock(ctx); return err }, "empty lock name"},
		{"TTL below 10ms", func() error { _, err := c.TimestampMutex("x", dlock.TTL(5*time.Millisecond)).TryLock(ctx); return err }, "at least 10ms"},
		{"Do with bad name", func() error { return c.TimestampMutex("").Do(ctx, func(context.Context) error { return nil }) }, "empty lock name"},
	} {
		if err := tc.err(); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error that says %q", tc.name, err, tc.want)
		}
	}
}

// TestTimestampMutexCluster: on a Redis Cluster the lock key and its fencing counter share
// a slot, and an Unlock wakes a waiter of another client (sharded pub/sub).
func TestTimestampMutexCluster(t *testing.T) {
	rdb := redistest.StartCluster(t, 3).Client(t)
	ctx := ctxTimeout(t, 30*time.Second)
	a, b := newClient(t, rdb), newClient(t, rdb)
	l, err := a.TimestampMutex("cl").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := acquiredAt(t, ctx, b.TimestampMutex("cl").Lock)
	time.Sleep(200 * time.Millisecond)
	released := time.Now()
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if at := <-got; at.IsZero() || at.Sub(released) > 2*time.Second {
		t.Errorf("the waiter got the lock %v after Unlock, want promptly", at.Sub(released))
	}
}

// deadlineHook records, in the order they are sent, the deadline each stamp_acquire.lua
// writes and the deadlines each stamp_release.lua carries.
type deadlineHook struct {
	mu       sync.Mutex
	acquired []string
	released map[string]bool
	shared   []string // deadlines acquired that an earlier release carries
}

func (h *deadlineHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *deadlineHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.record(cmd)
		return next(ctx, cmd)
	}
}

func (h *deadlineHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.record(cmd)
		}
		return next(ctx, cmds)
	}
}

// record reads EVAL(SHA) script numkeys keys... args...: the acquire's ARGV[2], the
// release's ARGV[3..] (after its one key).
func (h *deadlineHook) record(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 2 {
		return
	}
	sha, _ := args[1].(string)
	if strings.EqualFold(cmd.Name(), "eval") {
		sha = redis.NewScript(sha).Hash()
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	switch sha {
	case scripts.StampAcquire.Hash():
		d := fmt.Sprint(args[6])
		if h.released[d] {
			h.shared = append(h.shared, d)
		}
		h.acquired = append(h.acquired, d)
	case scripts.StampRelease.Hash():
		for _, d := range args[6:] {
			h.released[fmt.Sprint(d)] = true
		}
	}
}

// TestTimestampMutexHoldsNeverShareADeadline: holds of one Client that follow each other
// within a millisecond write distinct deadlines, so that no release, landing however
// late, owns a later hold's.
func TestTimestampMutexHoldsNeverShareADeadline(t *testing.T) {
	t.Parallel()
	_, rdb := standalone(t)
	h := &deadlineHook{released: map[string]bool{}}
	rdb.AddHook(h)
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 20*time.Second)
	m := c.TimestampMutex("fast")
	for range 300 {
		l, err := m.TryLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if err := l.Unlock(ctx); err != nil {
			t.Fatal(err)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.acquired) != 300 {
		t.Fatalf("%d acquisitions recorded, want 300", len(h.acquired))
	}
	if len(h.shared) > 0 {
		t.Fatalf("%d holds wrote a deadline an earlier release carries, e.g. %s", len(h.shared), h.shared[0])
	}
}
