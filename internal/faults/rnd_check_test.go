package faults

import (
	"cmp"
	"fmt"
	"slices"
	"time"

	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// The random scenario's checker: a pure function of the merged logs of every process
// (rndLog), so that it can be tested on made-up logs and rerun on a saved one.

// rndLog is everything the checker reads, on one wall clock (ns).
type rndLog struct {
	start, end int64             // the workload's
	holds      []rndHold         // one per lease and name (a MultiMutex lease is one per name)
	waits      []rndWait         // every blocking acquisition, from its call to its return
	faults     []rndFault        // what the injector did
	unsure     []rndUnsure       // attempts of unknown fate, which may hold their names a while
	left       []leftKey         // the keys on the lock servers once every lifetime had passed
	scopes     map[string]string // each name's deployment (rndFault.scope)
}

// rndHold is one lease of one name, held from Lock's return until the earlier of its
// last ValidUntil and the moment Unlock (or Close) was called.
type rndHold struct {
	proc, id, name string
	kind           string // mutex, multi, fair, ts, read, write, sem
	token          uint64
	since          int64 // when the acquisition was called
	from, to       int64
	n, size        int64 // a Semaphore's permits and size
}

func (h rndHold) String() string {
	return fmt.Sprintf("%s/%s %s %q token %d", h.proc, h.id, h.kind, h.name, h.token)
}

// rndWait is one blocking acquisition of names, from its call to its return or failure.
type rndWait struct {
	proc, id string
	names    []string
	from, to int64
}

// rndFault is one fault the injector made: active from..to; what it leaves behind may
// last afterglow longer (see rndBounds).
// rndUnsure is an attempt whose fate its agent did not know (evUnsure): it may hold names
// from its start until until, as a late request may (the Redlock cost), so that the
// free-time check excuses that window on those names as it does a fault's.
type rndUnsure struct {
	names       []string
	from, until int64
}

type rndFault struct {
	kind, target string
	scope        string // the deployment whose locks it may hold up; "" for all
	from, to     int64
	bytes        int // hold, duplicate: the bytes held back
}

// leftKey is a key found on a lock server at the end.
type leftKey struct {
	node string
	key  string
	pttl time.Duration // -1: no expiry
	life time.Duration // how long it may still live by design (keyLife); 0: it should be gone
}

// turnsLife is how long a Mutex's turn list and asks live after their last change
// (max(3×TTL, 1 minute) in the engine; the scenario's TTLs are below 20s): they may
// outlast the run, and go by themselves.
const turnsLife = time.Minute

// keyLife says how long key may outlive the end of the run: a Mutex's turn list and
// asks up to turnsLife; every other key but the fencing counters is gone once the
// leases' and the waiters' lifetimes have passed.
func keyLife(key string) time.Duration {
	_, suffix, ok := keyspace.CompanionOf(key)
	switch {
	case ok && (suffix == ":turns" || suffix == ":asks"):
		return turnsLife
	case ok && (suffix == ":queue:deadlines" || suffix == ":writers"):
		return goneLife // the tombstones of the waiters served or gone (gone.lua)
	case ok && suffix == keyspace.GoneInfix:
		return rndLongestLease + goneLife // a token's tombstone outlives its lease (gone.lua)
	case keyspace.IsOwnerKey(key):
		return rndLongestLease + time.Minute // a Client's owner name outlives its leases (owner.go in internal/engine)
	}
	return 0
}

// goneLife is how long a wait list remembers a waiter that was served or gave up, and a
// lock a token it served once its lease ended (GONE_MS in internal/scripts/gone.lua).
const goneLife = 10 * time.Second

// rndLongestLease is the longest a lease of the random scenario keeps its key: a FairMutex
// hand-over or a Mutex grant (waiterTTL in internal/engine), longer than rndMaxExtend.
const rndLongestLease = max(3*time.Second, rndMaxExtend)

// rndBounds are the checker's bounds.
type rndBounds struct {
	free      time.Duration // how long a lock may be free while someone waits, outside faults
	afterglow time.Duration // how long after its end a fault may still keep a lock taken
}

// rndResult is what the checker found: violations, and the longest free time it saw
// outside fault windows (the figure).
type rndResult struct {
	violations  []violation
	longestFree span
	freeName    string
	quiet       map[string]time.Duration // per deployment: the time outside fault windows, when free time counts
}

// checkRandom runs every check of the random scenario on log.
func checkRandom(log rndLog, b rndBounds) rndResult {
	var res rndResult
	res.violations = append(res.violations, checkRndExclusive(log)...)
	res.violations = append(res.violations, checkRndTokens(log)...)
	free, name, vs := checkRndFree(log, b)
	res.longestFree, res.freeName = free, name
	res.violations = append(res.violations, vs...)
	res.violations = append(res.violations, checkRndLeftovers(log)...)
	res.quiet = quietTime(log, b.afterglow)
	return res
}

// quietTime returns, per deployment, how long the workload ran outside fault windows:
// the time in which the free-time check applies.
func quietTime(log rndLog, afterglow time.Duration) map[string]time.Duration {
	out := map[string]time.Duration{}
	for name, scope := range log.scopes {
		if _, ok := out[scope]; !ok {
			for _, s := range subtract([]span{{log.start, log.end}}, faultSpans(log, name, afterglow)) {
				out[scope] += s.len()
			}
		}
	}
	return out
}

// rel renders a time of the log as seconds since the workload began.
func (log rndLog) rel(t int64) string { return fmt.Sprintf("+%.3fs", float64(t-log.start)/1e9) }

// byHoldName groups the holds by name, each group sorted by from.
func byHoldName(holds []rndHold) map[string][]rndHold {
	out := map[string][]rndHold{}
	for _, h := range holds {
		out[h.name] = append(out[h.name], h)
	}
	for _, hs := range out {
		slices.SortFunc(hs, func(a, b rndHold) int { return cmp.Compare(a.from, b.from) })
	}
	return out
}

// sortedNames returns m's keys in order, so that reports do not vary from run to run.
func sortedNames[V any](m map[string]V) []string {
	return slices.Sorted(func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	})
}

// maxViolations caps the violations one check reports per run: the first ones tell.
const maxViolations = 5

// checkRndLeftovers: once every key's lifetime has passed, nothing but fencing counters
// may be left on the lock servers. The keys are read once the leases' and the waiters'
// lifetimes have passed; a key that may live longer by design (keyLife) is left only if
// it has no expiry or expires later than its lifetime allows.
func checkRndLeftovers(log rndLog) []violation {
	var out []violation
	for _, k := range log.left {
		if isFence(k.key) || k.pttl >= 0 && k.pttl <= k.life {
			continue
		}
		if len(out) == maxViolations {
			break
		}
		ttl := "no expiry"
		if k.pttl >= 0 {
			ttl = fmt.Sprintf("PTTL %v", k.pttl)
		}
		out = append(out, violation{chkLeftovers, fmt.Sprintf("%s: key %q left at the end (%s)", k.node, oneLine(k.key), ttl)})
	}
	return out
}
