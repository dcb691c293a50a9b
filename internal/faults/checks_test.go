package faults

import (
	"fmt"
	"sort"
	"time"
)

// The checks. Each is a property of what the processes saw; each name appears in the
// report with what it means and the mutation that showed it can fail.
const (
	chkExclusive   = "exclusive"
	chkTokens      = "tokens"
	chkFencing     = "fencing"
	chkLossOnTime  = "loss-on-time"
	chkWritesValid = "writes-in-validity"
	chkCounter     = "counter"
	chkFreeTime    = "free-time"
	chkNoErrors    = "no-errors"
	chkStale       = "stale-release"
	chkTakeover    = "takeover"
	chkClose       = "close"
	chkBadInput    = "bad-input"
	chkUntouched   = "untouched"
	chkBelief      = "belief"
	chkAcks        = "replica-acks"
	chkLeftovers   = "leftovers"
	chkGuarded     = "guarded"
)

// checkMeanings is the report's table of checks.
var checkMeanings = []struct{ name, means string }{
	{chkExclusive, "no two holders of one lock at once: each holder's time, from Lock's return to its Unlock or the end of its lease (at ValidUntil at the latest), overlaps no other's (readers of an RWMutex only with each other; a Semaphore's holders within its size)"},
	{chkTokens, "fencing tokens strictly increase in the order the lock was taken, and each is larger than the largest the protected data has seen"},
	{chkFencing, "storage that checks tokens refuses the stale holder: what it accepted carries non-decreasing tokens"},
	{chkLossOnTime, "a running holder sees its lease end (Done, Err) by its ValidUntil, plus 50ms of scheduling"},
	{chkWritesValid, "a worker that checks its lease before each write writes only before ValidUntil"},
	{chkCounter, "a read-modify-write counter under the lock counts every hold exactly"},
	{chkFreeTime, "under contention the lock is never free for long while someone waits"},
	{chkNoErrors, "every Lock and Unlock the fault should not break succeeds"},
	{chkStale, "a stale holder's Unlock and Extend leave the new holder's key, token and TTL as they were, and say the lease is not held"},
	{chkTakeover, "a waiter takes a lock whose holder died within a bound of the key's expiry, and not before"},
	{chkClose, "Client.Close returns promptly, ends every lease, leaves no goroutine, and releases the locks (a waiter in another process gets them at once, not after their TTL)"},
	{chkBadInput, "invalid names, TTLs, sizes and counts get an error, at once, never a lease or a panic"},
	{chkUntouched, "keys of the wrong type planted where dlock keeps its state are left exactly as they were (DUMP and TTL), and calls on them fail at once"},
	{chkBelief, "a lease never believes in a key longer than a majority of the servers keep it"},
	{chkLeftovers, "once every key's lifetime has passed, nothing but fencing counters is left on the lock servers: a key without expiry, or one that outlives its lifetime, is a leak"},
	{chkGuarded, "a write sent with Lease.Guard by a holder paused past its lease, cut off, or delivered late is applied before the next holder's first write, or not at all"},
	{chkAcks, "with WithReplicaAcks, a lock whose write no replica acknowledged is refused with ErrNotReplicated and left nowhere, and one that was acknowledged is still held on the promoted replica"},
}

// interval is one hold, as its holder believed in it: from the return of Lock to the
// moment it stopped believing (Unlock called, the end seen, the process killed), cut at
// its last ValidUntil.
type interval struct {
	proc, id, name string
	token          uint64
	last           uint64 // contention holds: the largest token the data had seen
	from, to       int64
	valid          int64  // the last ValidUntil, 0 if unknown
	how            string // endReleased, endLost, "killed", "" for a contention hold
	endAt          int64  // when the end was seen
}

func (iv interval) String() string {
	return fmt.Sprintf("%s/%s token %d [%s, %s]", iv.proc, iv.id, iv.token, clock(iv.from), clock(iv.to))
}

// clock renders a wall-clock ns time as seconds.milliseconds, enough to compare within
// one run.
func clock(ns int64) string {
	t := time.Unix(0, ns)
	return t.Format("05.000")
}

// intervals pairs each agent's evAcquired with its evEnded, and turns evHold events
// into intervals. A lease with no end is cut where its process was killed.
func intervals(children ...*child) []interval {
	var out []interval
	for _, c := range children {
		open := map[string]*interval{}
		var order []string
		for _, e := range c.history() {
			switch e.Ev {
			case evAcquired:
				open[e.ID] = &interval{proc: c.name, id: e.ID, name: e.Name, token: e.Token, from: e.At, to: e.Valid, valid: e.Valid}
				order = append(order, e.ID)
			case evEnded:
				if iv := open[e.ID]; iv != nil {
					iv.how, iv.endAt, iv.valid = e.Err, e.At, e.Valid
					iv.to = min(e.At, e.Valid)
				}
			case evHold:
				out = append(out, interval{proc: c.name, id: fmt.Sprint(len(out)), name: e.Name, token: e.Token, last: e.Last, from: e.At, to: e.End})
			}
		}
		for _, id := range order {
			iv := open[id]
			if iv.how == "" && c.killedAt != 0 {
				iv.how, iv.endAt, iv.to = "killed", c.killedAt, min(iv.to, c.killedAt)
			}
			out = append(out, *iv)
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].from < out[j].from })
	return out
}

// byName returns the intervals of one lock.
func byName(ivs []interval, name string) []interval {
	return filter(ivs, func(iv interval) bool { return iv.name == name })
}

// byProc returns the intervals of one agent.
func byProc(ivs []interval, proc string) []interval {
	return filter(ivs, func(iv interval) bool { return iv.proc == proc })
}

func filter(ivs []interval, keep func(interval) bool) []interval {
	var out []interval
	for _, iv := range ivs {
		if keep(iv) {
			out = append(out, iv)
		}
	}
	return out
}

// overlaps returns up to max pairs of intervals (sorted by from) that overlap.
func overlaps(ivs []interval, limit int) [][2]interval {
	var out [][2]interval
	var reach interval // the interval reaching furthest so far
	for i, iv := range ivs {
		if i > 0 && iv.from < reach.to {
			out = append(out, [2]interval{reach, iv})
			if len(out) == limit {
				break
			}
		}
		if i == 0 || iv.to > reach.to {
			reach = iv
		}
	}
	return out
}

// checkExclusive reports every overlap among the holds of one lock.
func checkExclusive(r *run, ivs []interval) {
	for _, p := range overlaps(ivs, 5) {
		r.violate(chkExclusive, "two holders at once for %.1f ms: %v and %v", ms(p[0].to-p[1].from), p[0], p[1])
	}
}

// checkTokens reports tokens that do not grow in acquisition order, or that are not
// larger than what the protected data had seen.
func checkTokens(r *run, ivs []interval) {
	bad := 0
	for i, iv := range ivs {
		switch {
		case i > 0 && iv.token <= ivs[i-1].token:
			bad++
			if bad <= 5 {
				r.violate(chkTokens, "token %d of %v after token %d of %v", iv.token, iv, ivs[i-1].token, ivs[i-1])
			}
		case iv.last != 0 && iv.token <= iv.last:
			bad++
			if bad <= 5 {
				r.violate(chkTokens, "token %d of %v, but the data had seen %d", iv.token, iv, iv.last)
			}
		}
	}
}

// lossSlack is how late a running holder may see its lease end after ValidUntil: the
// scheduler's timer and the goroutine that watches Done, on a loaded machine.
const lossSlack = 50 * time.Millisecond

// checkLossOnTime reports lost leases whose end was seen later than lossSlack after
// their ValidUntil. Holders that were paused or killed are the caller's to leave out.
func checkLossOnTime(r *run, ivs []interval) {
	for _, iv := range ivs {
		if iv.how == endLost && iv.endAt > iv.valid+int64(lossSlack) {
			r.violate(chkLossOnTime, "%v: lease ended at %s, %.1f ms after its ValidUntil %s", iv, clock(iv.endAt), ms(iv.endAt-iv.valid), clock(iv.valid))
		}
		if iv.how == "" {
			r.violate(chkLossOnTime, "%v: the lease never ended", iv)
		}
	}
}

// checkStoreLog reports accepted writes whose token is smaller than one accepted before.
func checkStoreLog(r *run, log []accepted) {
	for i := 1; i < len(log); i++ {
		if log[i].token < log[i-1].token {
			r.violate(chkFencing, "storage accepted token %d from %s at %s after token %d from %s",
				log[i].token, log[i].writer, clock(log[i].at), log[i-1].token, log[i-1].writer)
			return
		}
	}
}

// maxFree returns the longest time the lock was free between two holds (sorted by from),
// and when it began.
func maxFree(ivs []interval) (gap time.Duration, at int64) {
	var reach int64
	for i, iv := range ivs {
		if i > 0 && iv.from-reach > int64(gap) {
			gap, at = time.Duration(iv.from-reach), reach
		}
		reach = max(reach, iv.to)
	}
	return gap, at
}

// ms converts nanoseconds to milliseconds for messages.
func ms[T int64 | time.Duration](ns T) float64 { return float64(ns) / 1e6 }
