package faults

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// staleTTL is the leases' length in the stale-release scenario: long, so that A's
// renewal does not notice the loss before A's stale call.
const staleTTL = 5 * time.Second

// staleRelease: A's lease goes stale and B takes the lock; then A calls Unlock or Extend
// on its stale lease. Twice because an operator deleted A's key (A still believes in its
// lease: Redis must refuse), once because A was stopped (SIGSTOP) past its TTL. Each call
// must return ErrNotHeld and leave B's key, token and TTL as they were.
func staleRelease(r *run) {
	d := deploy(r, 1)
	a := d.spawn(r, "A", d.addrs())
	b := d.spawn(r, "B", d.addrs())
	rdb := d.nodes[0].Client(r.t)
	refused := 0
	for _, op := range []string{"unlock", "extend"} {
		name := "deleted-" + op
		if !takeOver(r, a, b, name, staleTTL, func() { rdb.Del(context.Background(), lockKey(name)) }) {
			return
		}
		refused += staleCall(r, a, rdb, name, op)
	}
	const pausedTTL = time.Second
	if !takeOver(r, a, b, "paused", pausedTTL, func() { a.pause(); r.sleep(pausedTTL + 200*time.Millisecond) }) {
		return
	}
	a.resume()
	refused += staleCall(r, a, rdb, "paused", "unlock")
	refused += staleCall(r, a, rdb, "paused", "extend")
	r.value(float64(refused))
	finishAll(a, b)
}

// takeOver: A takes name, stale makes A's lease stale, B takes name.
func takeOver(r *run, a, b *child, name string, ttl time.Duration, stale func()) bool {
	a.send(command{Op: "lock", ID: "a-" + name, Name: name, TTL: ttl})
	if _, ok := a.expectEv(evAcquired, "a-"+name, chkNoErrors); !ok {
		return false
	}
	stale()
	b.send(command{Op: "lock", ID: "b-" + name, Name: name, TTL: staleTTL, Wait: 3 * staleTTL})
	_, ok := b.expectEv(evAcquired, "b-"+name, chkTakeover)
	return ok
}

// staleCall has A call op on its stale lease of name and checks the outcome; it returns 1
// if the call was refused as it must be.
func staleCall(r *run, a *child, rdb *redis.Client, name, op string) int {
	id := "a-" + name
	before := keyState(rdb, name)
	a.send(command{Op: op, ID: id, TTL: time.Minute})
	e := a.await(func(e event) bool { return e.ID == id && (e.Ev == evFailed || e.Ev == evDone && e.Op == op) })
	after := keyState(rdb, name)
	r.expect(after.value == before.value && after.pttl > 0 && after.pttl <= staleTTL, chkStale,
		"A's stale %s of %q changed B's key: %v, then %v", op, name, before, after)
	if e.Ev != evFailed || e.Kind != "not-held" {
		r.violate(chkStale, "A's stale %s of %q returned %s %q, not ErrNotHeld", op, name, e.Ev, e.Err)
		return 0
	}
	return 1
}

type keyInfo struct {
	value string
	pttl  time.Duration
}

func (k keyInfo) String() string { return fmt.Sprintf("%.8s… with %v left", k.value, k.pttl) }

func keyState(rdb *redis.Client, name string) keyInfo {
	ctx := context.Background()
	v, _ := rdb.Get(ctx, lockKey(name)).Result()
	p, _ := rdb.PTTL(ctx, lockKey(name)).Result()
	return keyInfo{v, p}
}
