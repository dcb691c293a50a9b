package faults

import (
	"context"
	"fmt"
	"time"
)

const (
	raceTTL   = 300 * time.Millisecond // renewal every 100ms
	raceShort = 30 * time.Millisecond  // the Extend that races it
	raceFor   = 5 * time.Second
	raceLocks = 4
)

// extendRace: A holds 4 locks on one server, each with a Client of its own. dlock sends a
// lock's calls on its lane in order, and a renewal on a go-redis pipeline of its own. Just as each lease's
// renewal falls due, A calls Extend(300ms) and, while that is in flight, Extend(30ms):
// the short Extend waits behind the long one on the lane while the renewal goes out. If
// Redis ends up with the short TTL while the lease believes the renewal's, A's sampler
// sees the key gone while the lease is still valid (belief), and B, told at once, takes
// the lock while A believes it holds it (exclusive). The shorten mutation shortens the
// keys behind A's back instead.
func extendRace(r *run) {
	d := deploy(r, 1)
	a := spawn(r, agentConfig{Name: "A", Nodes: d.addrs(), Store: d.store.Addr})
	b := d.spawn(r, "B", d.addrs())
	a.send(command{Op: "extendrace", ID: "x", Name: "race", TTL: raceTTL, Short: raceShort, Wait: raceFor, N: raceLocks})
	stop := make(chan struct{})
	if r.mutated(mutShorten) {
		go shortenKeys(r, d, stop)
	}
	end := time.Now().Add(raceFor + time.Second)
	for i := 0; ; i++ {
		e, ok := a.awaitWithin(time.Until(end), func(e event) bool { return e.Ev == evDiverged })
		if !ok {
			break
		}
		r.violate(chkBelief, "A's lease of %q believed in itself until %s, but at %s only %d node(s) had its key",
			e.Name, clock(e.Valid), clock(e.At), e.N)
		b.send(command{Op: "grab", ID: fmt.Sprint("g", i), Name: e.Name, TTL: raceTTL, Wait: raceTTL, Every: time.Millisecond, Short: 5 * time.Millisecond})
	}
	close(stop)
	done := a.awaitEv(evDone, "x")
	r.value(float64(done.N))
	finishAll(a, b)
	for _, e := range a.history() {
		if e.Ev == "dbg" {
			r.t.Log(e.Err)
		}
	}
	ivs := intervals(a, b)
	for i := range raceLocks {
		checkExclusive(r, byName(ivs, "race"+string(rune('0'+i))))
	}
	r.note("%d leases, %d of them diverged from Redis", len(byProc(ivs, "A")), done.N)
}

// shortenKeys (the shorten mutation) makes A's keys expire in 1ms, every 100ms.
func shortenKeys(r *run, d *deployment, stop <-chan struct{}) {
	rdbs := d.clients(r)
	for {
		select {
		case <-stop:
			return
		case <-time.After(100 * time.Millisecond):
		}
		for i := range raceLocks {
			for _, rdb := range rdbs {
				rdb.PExpire(context.Background(), lockKey("race"+string(rune('0'+i))), time.Millisecond)
			}
		}
	}
}
