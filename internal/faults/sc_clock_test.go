package faults

import (
	"time"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// clockTTL is the holder's lease in the clock scenario.
const clockTTL = 2 * time.Second

// clockStep: a quorum of 3 whose node 1 runs with libfaketime. A takes the lock while
// node 3 is cut off from it (A holds on nodes 1 and 2) and works under it, writing to the
// fenced storage every 10ms. Node 1's clock is stepped an hour forward: A's key there
// expires at once, and B gets a majority (nodes 1 and 3) while A still holds its lease:
// two holders, the documented limitation. What must still hold: B's token is larger,
// the storage refuses every write of A's after B's, and A learns of its loss at its next
// renewal. The overlap is the figure, not a violation.
func clockStep(r *run) {
	stepped, clk := redistest.StartFaketime(r.t)
	d := &deployment{nodes: append([]*redistest.Server{stepped}, redistest.StartNodes(r.t, 2)...), store: redistest.Start(r.t)}
	d.data = d.store.Client(r.t)
	ps := d.proxies(r)
	a := d.spawn(r, "A", proxyAddrs(ps))
	b := d.spawn(r, "B", d.addrs())
	if _, ok := lockOnTwo(r, d, ps, a, "res", clockTTL); !ok {
		return
	}
	a.send(command{Op: "work", ID: "a", Every: 10 * time.Millisecond, Wait: 3 * clockTTL})
	r.sleep(100 * time.Millisecond)
	clk.Step(r.t, time.Hour)
	r.step("node 1's clock stepped an hour forward")
	b.send(command{Op: "lock", ID: "b", Name: "res", TTL: clockTTL, Wait: 3 * clockTTL})
	if _, ok := b.expectEv(evAcquired, "b", chkNoErrors); ok {
		b.send(command{Op: "write", ID: "b"})
		b.awaitEv(evWrote, "b")
		a.await(isEnd("a"))
		b.send(command{Op: "unlock", ID: "b"})
		b.awaitEv(evDone, "b")
	}
	a.await(func(e event) bool { return e.Ev == evDone && e.Op == "work" })
	finishAll(a, b)
	ivs := intervals(a, b)
	checkTokens(r, ivs)
	checkStore(r, d, "res")
	overlap := overlaps(ivs, 1)
	if len(overlap) == 0 {
		r.value(0)
		r.note("no second holder appeared this run")
		return
	}
	p := overlap[0]
	r.value(ms(p[0].to - p[1].from))
	r.note("second holder (documented): %v overlapped %v; the storage refused %d of A's writes", p[1], p[0], refused(a))
}

// refused counts the writes of c that the fenced storage refused.
func refused(c *child) int {
	n := 0
	for _, e := range c.history() {
		if e.Ev == evWrote && !e.OK {
			n++
		}
	}
	return n
}
