package faults

import (
	"context"
	"strings"
	"time"

	"github.com/seed51c676c8/dlock/internal/faultproxy"
	"github.com/seed51c676c8/dlock/internal/lateproxy"
)

// guardTTL is the stale holders' lease in guard-stale.
const guardTTL = 600 * time.Millisecond

// guardStale: three holders write with Lease.Guard beside their locks, each to a list;
// then A is stopped (SIGSTOP), C's link is cut, and L's next guarded write is held back
// by a proxy until its call has timed out, and L unlocks. Past their leases, B takes each lock and
// writes; then A resumes and writes, C writes through its cut link, and L's held write
// is delivered. No stale write may be in a list after B's.
func guardStale(r *run) {
	d := deploy(r, 1)
	fp := faultproxy.New(r.t, d.nodes[0].Addr)
	lp := lateproxy.New(r.t, d.nodes[0].Addr)
	stale := map[string]*child{
		"a": d.spawn(r, "A", d.addrs()),
		"c": d.spawn(r, "C", []string{fp.Addr}),
		"l": d.spawn(r, "L", []string{lp.Addr}),
	}
	b := d.spawn(r, "B", d.addrs())
	for id, c := range stale {
		c.send(command{Op: "lock", ID: id, Name: "g-" + id, TTL: guardTTL})
		if _, ok := c.expectEv(evAcquired, id, chkNoErrors); !ok {
			return
		}
		c.send(command{Op: "guard", ID: id})
		if e := c.awaitEv(evWrote, id); !e.OK {
			r.violate(chkGuarded, "%s's guarded write while it held its lease failed: %s", c.name, e.Err)
		}
	}
	stale["a"].pause()
	fp.Cut(r.t)
	held := lp.HoldConnections()
	stale["l"].send(command{Op: "guard", ID: "l", Wait: guardTTL / 2})
	stale["l"].awaitEv(evWrote, "l")
	// L's client goes on over new connections: its lease ends by its Unlock.
	stale["l"].send(command{Op: "unlock", ID: "l"})
	stale["l"].awaitEv(evDone, "l")
	r.step("A paused, C cut off, L's guarded write held back")
	r.sleep(2 * guardTTL)
	keys := map[string]string{}
	for id := range stale {
		bid := "b" + id
		b.send(command{Op: "lock", ID: bid, Name: "g-" + id, TTL: guardTTL, Wait: 10 * guardTTL})
		if _, ok := b.expectEv(evAcquired, bid, chkTakeover); !ok {
			return
		}
		b.send(command{Op: "guard", ID: bid})
		e := b.awaitEv(evWrote, bid)
		r.expect(e.OK, chkGuarded, "B's guarded write under its new lease failed: %s", e.Err)
		keys[id] = e.Name
	}
	stale["a"].resume()
	for _, id := range []string{"a", "c"} {
		stale[id].send(command{Op: "guard", ID: id})
		stale[id].awaitEv(evWrote, id)
	}
	held.Deliver()
	select {
	case <-held.Landed():
	case <-time.After(5 * time.Second):
		r.note("L's held write did not land within 5s")
	}
	checkGuarded(r, d, keys)
	for _, c := range stale {
		c.finish()
	}
	b.finish()
}

// checkGuarded reports every entry in the guarded lists after B's, each list named by the
// id of its lock's stale holder.
func checkGuarded(r *run, d *deployment, keys map[string]string) {
	rdb := d.clients(r)[0]
	applied := 0
	for id, key := range keys {
		entries, err := rdb.LRange(context.Background(), key, 0, -1).Result()
		if err != nil {
			r.fatalf("read %s: %v", key, err)
		}
		after := false
		for _, e := range entries {
			switch {
			case strings.HasPrefix(e, "B:"):
				after = true
			case after:
				applied++
				r.violate(chkGuarded, "lock g-%s: the stale holder's guarded write %q was applied after B's (list %q)", id, e, entries)
			}
		}
	}
	r.value(float64(applied))
}
