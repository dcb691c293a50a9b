package faults

import (
	"time"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// restartTTL is the holder's lease in the restart scenarios.
const restartTTL = 2 * time.Second

// aofAlways is the persistence docs/quorum.md asks of quorum nodes.
var aofAlways = redistest.WithArgs("--appendonly", "yes", "--appendfsync", "always")

// nodeRestart: a quorum of 3. A takes the lock while node 3 is cut off from it, so only
// nodes 1 and 2 hold A's key; node 1 is then killed (SIGKILL), and B tries the lock every
// 10ms. With persist, node 1 runs with AOF (appendfsync always) and comes back at once,
// and A holds on, renewing, and unlocks after TTL + 500ms; without, node 1 has no
// persistence and stays down for longer than the TTL, and A loses its lease. Either way
// B must get the lock only after A's end. The no-aof mutation restarts node 1 empty at
// once.
func nodeRestart(persist bool) func(r *run) {
	return func(r *run) {
		var opts []redistest.Option
		if persist && !r.mutated(mutNoAOF) {
			opts = append(opts, aofAlways)
		}
		d := deploy(r, 3, opts...)
		ps := d.proxies(r)
		a := d.spawn(r, "A", proxyAddrs(ps))
		b := d.spawn(r, "B", d.addrs())
		ea, ok := lockOnTwo(r, d, ps, a, "res", restartTTL)
		if !ok {
			return
		}
		d.nodes[0].Kill(r.t)
		r.step("node 1 killed")
		b.send(command{Op: "grab", ID: "b", Name: "res", TTL: restartTTL, Wait: 6 * restartTTL, Every: 10 * time.Millisecond})
		if !persist {
			r.sleep(restartTTL + 200*time.Millisecond)
		}
		d.nodes[0].Restart(r.t)
		r.step("node 1 restarted")
		if persist {
			r.sleep(time.Until(time.Unix(0, ea.At).Add(restartTTL + 500*time.Millisecond)))
			a.send(command{Op: "unlock", ID: "a"})
		}
		if eb, ok := b.expectEv(evAcquired, "b", chkTakeover); ok {
			end := a.await(isEnd("a"))
			r.value(ms(eb.At - min(end.At, end.Valid)))
			b.send(command{Op: "unlock", ID: "b"})
			b.awaitEv(evDone, "b")
		}
		finishAll(a, b)
		ivs := intervals(a, b)
		checkExclusive(r, ivs)
		checkTokens(r, ivs)
		if persist && byProc(ivs, "A")[0].how != endReleased {
			r.note("A lost its lease although node 1 kept its key across the restart")
		}
	}
}
