package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/redis/go-redis/v9"
)

const (
	volatileTTL   = time.Second
	volatileKeys  = 20000
	takeoverBound = 250 * time.Millisecond
)

// holderKilled: the server holds 20,000 other keys with TTLs of 0.5s to 10s, so that its
// expiry cycle is busy; A holds the lock, B waits for it, and A is killed (SIGKILL) at a
// random moment. B must take the lock within takeoverBound of A's key's expiry, and not
// before A's lease ended.
func holderKilled(r *run) {
	d := deploy(r, 1)
	rdb := d.nodes[0].Client(r.t)
	fillVolatile(r, rdb)
	a := d.spawn(r, "A", d.addrs())
	b := d.spawn(r, "B", d.addrs())
	a.send(command{Op: "lock", ID: "a", Name: "res", TTL: volatileTTL})
	if _, ok := a.expectEv(evAcquired, "a", chkNoErrors); !ok {
		return
	}
	b.send(command{Op: "lock", ID: "b", Name: "res", TTL: volatileTTL, Wait: 10 * volatileTTL})
	r.sleep(time.Duration(100+rand.IntN(500)) * time.Millisecond)
	a.kill()
	left, err := rdb.PTTL(context.Background(), lockKey("res")).Result()
	expiry := time.Now().Add(left).UnixNano()
	if err != nil || left < 0 {
		r.fatalf("the lock key after A was killed: %v, %v", left, err)
	}
	if eb, ok := b.expectEv(evAcquired, "b", chkTakeover); ok {
		late := time.Duration(eb.At - expiry)
		r.value(ms(late))
		r.expect(late <= takeoverBound, chkTakeover, "B took the lock %.1f ms after A's key expired (bound %v)", ms(late), takeoverBound)
	}
	b.finish()
	checkExclusive(r, intervals(a, b))
}

// fillVolatile writes volatileKeys keys with TTLs between 0.5s and 10s.
func fillVolatile(r *run, rdb *redis.Client) {
	ctx := context.Background()
	for i := 0; i < volatileKeys; i += 1000 {
		pipe := rdb.Pipeline()
		for j := i; j < i+1000; j++ {
			pipe.Set(ctx, fmt.Sprint("filler:", j), "x", time.Duration(500+rand.IntN(9500))*time.Millisecond)
		}
		if _, err := pipe.Exec(ctx); err != nil {
			r.fatalf("fill: %v", err)
		}
	}
}
