package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// rndLeftovers waits until the lock servers hold nothing but fencing counters and keys
// that may outlive the run by design (keyLife), or until deadline (when every other key
// dlock may have written has outlived its lifetime), and returns what is left then.
func rndLeftovers(r *run, deployments map[string][]*redistest.Server, deadline time.Time) []leftKey {
	for {
		var left []leftKey
		short := false
		for _, scope := range sortedNames(deployments) {
			for i, s := range deployments[scope] {
				for _, k := range keysOn(r, fmt.Sprintf("%s node %d", scope, i+1), s) {
					left = append(left, k)
					short = short || k.life == 0
				}
			}
		}
		if !short || time.Now().After(deadline) || r.ctx.Err() != nil {
			return left
		}
		r.sleep(250 * time.Millisecond)
	}
}

// keysOn returns the keys of s other than fencing counters, with their PTTL.
func keysOn(r *run, node string, s *redistest.Server) []leftKey {
	ctx, cancel := context.WithTimeout(r.ctx, 5*time.Second)
	defer cancel()
	rdb := s.Client(r.t)
	keys, err := rdb.Keys(ctx, "*").Result() // a few keys at most: KEYS is fine here
	if err != nil {
		r.fatalf("%s: list keys: %v", node, err)
	}
	var out []leftKey
	for _, k := range keys {
		if isFence(k) {
			continue
		}
		ttl, _ := rdb.PTTL(ctx, k).Result()
		if ttl == -2 { // expired since KEYS listed it (go-redis gives PTTL's -2 as is)
			continue
		}
		out = append(out, leftKey{node: node, key: k, pttl: ttl, life: keyLife(k)})
	}
	return out
}

func isFence(key string) bool {
	_, suffix, ok := keyspace.CompanionOf(key)
	return ok && suffix == ":fence"
}

// rngFor is the injector's generator for seed (the agents draw from streams of their own).
func rngFor(seed uint64) *rand.Rand { return rand.New(rand.NewPCG(seed, 1<<62)) }
