package faults

import (
	"strings"
	"time"
)

const (
	closeTTL   = 10 * time.Second // long: a lock left to expire would keep B out that long
	closeBound = 500 * time.Millisecond
)

// closeLocks are the locks of the close scenario: the agent's load takes the first of
// each pair, B waits for the second.
var closeLocks = []struct{ load, wait command }{
	{command{Kind: "mutex", Name: "m0"}, command{Kind: "mutex", Name: "m0"}},
	{command{Kind: "mutex", Name: "m1"}, command{Kind: "mutex", Name: "m1"}},
	{command{Kind: "fair", Name: "f0"}, command{Kind: "fair", Name: "f0"}},
	{command{Kind: "read", Name: "rw0"}, command{Kind: "write", Name: "rw0"}},
	{command{Kind: "sem", Name: "s0"}, command{Kind: "sem", Name: "s0", Size: 2, N: 2}},
}

// closeUnderLoad: agent C takes and releases five locks of four kinds from 3 goroutines
// each (TTL 10s); after 1.5s its load stops, holding what it holds, B starts waiting for
// each lock (a Semaphore's every permit, an RWMutex's write lock), and 300ms later C
// closes its Client, with calls still in flight. Close must return promptly, end every
// lease and goroutine, refuse what comes after it, and release the locks: B must get
// each within 500ms of Close, not after the TTL.
func closeUnderLoad(r *run) {
	d := deploy(r, 1)
	c := d.spawn(r, "C", d.addrs())
	b := d.spawn(r, "B", d.addrs())
	var specs []string
	for _, l := range closeLocks {
		specs = append(specs, l.load.Kind+":"+l.load.Name)
	}
	const loadFor = 1500 * time.Millisecond
	c.send(command{Op: "closeload", ID: "c", Names: specs, N: 3, Wait: loadFor, Every: 300 * time.Millisecond, TTL: closeTTL})
	c.awaitEv(evStopped, "c")
	for _, l := range closeLocks {
		w := l.wait
		w.Op, w.ID, w.TTL, w.Wait = "lock", "b-"+w.Name, closeTTL, 3*time.Second
		b.send(w)
	}
	done := c.awaitEv(evDone, "c")
	closedAt := done.At
	r.value(ms(done.Dur))
	r.expect(done.Dur <= int64(time.Second), chkClose, "Close took %.1f ms under load", ms(done.Dur))
	r.expect(done.N == 0, chkClose, "%d leases had not ended after Close", done.N)
	r.expect(done.M == 0, chkClose, "goroutines of the load were still in dlock calls 2s after Close")
	r.expect(done.Err == "", chkClose, "under load or after Close: %s", done.Err)
	if leak, ok := c.awaitWithin(time.Second, func(e event) bool { return e.Ev == evLeak }); ok {
		r.violate(chkClose, "goroutines left after Close: %s", firstLine(leak.Err))
	}
	for _, l := range closeLocks {
		e := b.awaitEv(evAcquired, "b-"+l.wait.Name)
		switch {
		case e.Ev != evAcquired:
			r.violate(chkClose, "B did not get %s %q after C's Close: %s", l.wait.Kind, l.wait.Name, e.Err)
		case e.At > closedAt+int64(closeBound):
			r.violate(chkClose, "B got %s %q %.1f ms after C's Close (bound %v)", l.wait.Kind, l.wait.Name, ms(e.At-closedAt), closeBound)
		}
	}
	finishAll(c, b)
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}
