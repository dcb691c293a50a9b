package faults

import (
	"context"
	"time"
)

// pauseTTL is the holder's lease in the pause scenarios; it is paused for twice that.
const pauseTTL = time.Second

// resumeSlack is how soon a holder that was stopped past its deadline must see its lease
// end once it runs again.
const resumeSlack = 200 * time.Millisecond

// pauseHolder: A holds the lock and writes; A is stopped (SIGSTOP) for twice its TTL; B
// takes the lock and writes; A runs again and writes with its stale token, as a holder
// paused between its check and its write would. The storage must refuse it, B must have
// taken the lock only after A's ValidUntil, and A must see its lease lost at once. kind is
// the command's: "" for a Mutex, "elect" for an Election's terms, which B then reads back.
func pauseHolder(nodes int, kind string) func(r *run) {
	return func(r *run) {
		d := deploy(r, nodes)
		a := d.spawn(r, "A", d.addrs())
		b := d.spawn(r, "B", d.addrs())
		a.send(command{Op: "lock", ID: "a", Kind: kind, Name: "res", TTL: pauseTTL})
		if _, ok := a.expectEv(evAcquired, "a", chkNoErrors); !ok {
			return
		}
		a.send(command{Op: "write", ID: "a"})
		a.awaitEv(evWrote, "a")
		a.pause()
		pausedAt := time.Now()
		b.send(command{Op: "lock", ID: "b", Kind: kind, Name: "res", TTL: pauseTTL, Wait: 5 * pauseTTL})
		eb, ok := b.expectEv(evAcquired, "b", chkTakeover)
		if ok && kind == "elect" {
			checkLeader(r, b, eb)
		}
		if ok {
			b.send(command{Op: "write", ID: "b"})
			b.awaitEv(evWrote, "b")
		}
		r.sleep(time.Until(pausedAt.Add(2 * pauseTTL)))
		a.resume()
		resumedAt := time.Now()
		a.send(command{Op: "write", ID: "a"})
		stale := a.awaitEv(evWrote, "a")
		r.expect(!stale.OK, chkFencing, "the storage accepted A's write with stale token %d after B (token %d) wrote", stale.Token, eb.Token)
		end, seen := a.awaitWithin(2*time.Second, isEnd("a"))
		switch {
		case !seen:
			r.violate(chkLossOnTime, "A, resumed after its deadline, did not see its lease end within 2s")
		case end.Err != endLost || end.At-resumedAt.UnixNano() > int64(resumeSlack):
			r.violate(chkLossOnTime, "A, resumed after its deadline, saw its lease end %.1f ms later, %s", ms(end.At-resumedAt.UnixNano()), end.Err)
		}
		if ok {
			b.send(command{Op: "unlock", ID: "b"})
			b.awaitEv(evDone, "b")
			r.value(ms(eb.At - end.Valid))
		}
		finishAll(a, b)
		ivs := intervals(a, b)
		checkExclusive(r, ivs)
		checkTokens(r, ivs)
		checkStore(r, d, "res")
	}
}

// isEnd matches the end of lease id.
func isEnd(id string) func(event) bool {
	return func(e event) bool { return e.Ev == evEnded && e.ID == id }
}

// finishAll ends the agents; their histories are complete after it.
func finishAll(cs ...*child) {
	for _, c := range cs {
		c.finish()
	}
}

// checkStore checks the storage's log of accepted writes for name.
func checkStore(r *run, d *deployment, name string) {
	log, err := storeLog(context.Background(), d.data, name)
	if err != nil {
		r.fatalf("read the storage: %v", err)
	}
	checkStoreLog(r, log)
}
