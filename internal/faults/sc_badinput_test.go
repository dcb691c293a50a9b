package faults

import (
	"context"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// badCalls is how many calls the bad-input scenario makes.
const badCalls = 300

// planted are keys of the wrong type where dlock keeps its state, as "kind:name:key", and
// how to plant each.
var planted = []struct {
	spec  string
	plant func(ctx context.Context, rdb *redis.Client, key string) error
}{
	{"mutex:planted-m:dlock:planted-m", func(ctx context.Context, rdb *redis.Client, key string) error {
		return rdb.HSet(ctx, key, "f", "v").Err()
	}},
	{"mutex:planted-f:{dlock:planted-f}:fence", func(ctx context.Context, rdb *redis.Client, key string) error {
		return rdb.RPush(ctx, key, "not", "a", "counter").Err()
	}},
	{"sem:planted-s:dlock:planted-s", func(ctx context.Context, rdb *redis.Client, key string) error {
		return rdb.Set(ctx, key, "not a sorted set", time.Minute).Err()
	}},
	{"read:planted-r:{dlock:planted-r}:readers", func(ctx context.Context, rdb *redis.Client, key string) error {
		return rdb.SAdd(ctx, key, "x").Err()
	}},
	{"write:planted-w:dlock:planted-w", func(ctx context.Context, rdb *redis.Client, key string) error {
		return rdb.LPush(ctx, key, "x").Err()
	}},
	{"fair:planted-q:{dlock:planted-q}:queue", func(ctx context.Context, rdb *redis.Client, key string) error {
		return rdb.Set(ctx, key, "x", 0).Err()
	}},
}

// badInput plants keys of the wrong type, then an agent makes badCalls random calls with
// bad input (see agent_fuzz_test.go). Every call must get what its class must get; the
// agent must not crash; the planted keys must be exactly as they were (DUMP, TTL); and the
// calls with invalid arguments must have written nothing.
func badInput(r *run) {
	ctx := context.Background()
	d := deploy(r, 1)
	rdb := d.nodes[0].Client(r.t)
	var specs []string
	before := map[string]keyDump{}
	for _, p := range planted {
		key := strings.SplitN(p.spec, ":", 3)[2]
		if err := p.plant(ctx, rdb, key); err != nil {
			r.fatalf("plant %s: %v", key, err)
		}
		specs = append(specs, p.spec)
		before[key] = dump(ctx, rdb, key)
	}
	a := d.spawn(r, "A", d.addrs())
	seed := rand.Int64()
	r.t.Logf("seed %d", seed)
	a.send(command{Op: "fuzz", ID: "f", N: badCalls, Seed: seed, Names: specs})
	a.awaitEv(evDone, "f")
	a.finish()
	r.expect(a.exitedCleanly(), chkBadInput, "the agent did not exit cleanly: %v", a.cmd.ProcessState)
	r.value(float64(judgeBad(r, a)))
	for key, b := range before {
		after := dump(ctx, rdb, key)
		r.expect(after.same(b), chkUntouched, "planted key %q changed: %v, then %v", key, b, after)
	}
	if keys, _ := rdb.Keys(ctx, "*inv-*").Result(); len(keys) > 0 {
		r.violate(chkBadInput, "calls with invalid arguments wrote %d keys, such as %q", len(keys), keys[0])
	}
}

// judgeBad reports every call that did not get what its class must get, and returns how
// many did.
func judgeBad(r *run, a *child) int {
	good := 0
	for _, e := range a.history() {
		switch {
		case e.Ev != evBad:
		case e.OK:
			good++
		case e.Name == badWrongType:
			r.violate(chkUntouched, "%s on a key of the wrong type: %q after %.1f ms (an error within %v expected)", e.Op, e.Err, ms(e.Dur), wrongTypeBound)
		default:
			r.violate(chkBadInput, "%s (%s): %q after %.1f ms", e.Op, e.Name, e.Err, ms(e.Dur))
		}
	}
	return good
}

// keyDump is a key's serialized value and TTL.
type keyDump struct {
	value string
	ttl   time.Duration
}

func dump(ctx context.Context, rdb *redis.Client, key string) keyDump {
	v, _ := rdb.Dump(ctx, key).Result()
	t, _ := rdb.PTTL(ctx, key).Result()
	return keyDump{v, t}
}

// same reports whether k is b, a moment later: same value, and a TTL that only ran down.
func (k keyDump) same(b keyDump) bool {
	if k.value != b.value || (k.ttl < 0) != (b.ttl < 0) {
		return false
	}
	return k.ttl <= b.ttl && k.ttl > b.ttl-time.Minute
}

func (k keyDump) String() string {
	if k.value == "" {
		return "gone"
	}
	return "TTL " + k.ttl.String()
}
