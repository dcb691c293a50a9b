package faults

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"math/rand/v2"
	"time"

	"github.com/seed51c676c8/dlock"
)

// Bounds of the random workload's draws.
const (
	rndMaxExtend = 2 * time.Second // the longest Extend: with the TTLs, the longest a key lives
	rndMaxWait   = 3 * time.Second // the longest a blocking acquisition waits
	rndCloseOdds = 50              // one operation in this many closes the Client
)

// rndWorker is one goroutine of the random workload.
type rndWorker struct {
	a     *agent
	n     int
	specs []rndSpec
	st    *rndStats
	rng   *rand.Rand
}

func (w *rndWorker) run(until time.Time) {
	for k := 0; time.Now().Before(until); k++ {
		if w.rng.IntN(rndCloseOdds) == 0 {
			w.st.add("close")
			w.a.reopen()
			continue
		}
		w.once(fmt.Sprintf("w%d.%d", w.n, k))
	}
}

// once acquires a lock it draws (Lock, or TryLock one time in four), holds it a while,
// Extending it longer or shorter, and lets it go: Unlock, or, for a lease that does not
// renew, one time in four, leaves it to run out.
func (w *rndWorker) once(id string) {
	s := w.specs[w.rng.IntN(len(w.specs))]
	try := w.rng.IntN(4) == 0
	n := int64(1)
	if s.Kind == "sem" {
		n = 1 + w.rng.Int64N(s.Size)
	}
	ctx, cancel := w.waitCtx()
	defer cancel()
	c := w.a.current()
	since := time.Now().UnixNano()
	if try {
		w.st.add("trylock")
	} else {
		w.st.add("lock")
		w.a.emit(event{Ev: evWaiting, ID: id, Names: s.Names, At: since})
	}
	l, err := w.a.rndAcquire(ctx, c, s, try, n)
	at := time.Now().UnixNano() // Lock's return, before anything can delay the report
	if err != nil {
		w.st.add("failed:" + failKind(err))
		w.a.emit(event{Ev: evFailed, ID: id, Op: "acquire", At: at, Err: err.Error(), Kind: kindOf(err)})
		return
	}
	w.st.add("acquired")
	h := w.a.rndAdopt(id, s, n, since, at, l, c)
	w.hold(h, s)
	if s.NoRenew && w.rng.IntN(4) == 0 {
		w.st.add("abandon")
		return
	}
	w.st.add("unlock")
	h.unlockAt.CompareAndSwap(0, time.Now().UnixNano())
	uctx, ucancel := context.WithTimeout(context.Background(), time.Second)
	defer ucancel()
	if err := h.l.Unlock(uctx); err != nil {
		w.st.add("unlock-failed")
	}
}

// waitCtx bounds an acquisition: a timeout up to rndMaxWait, and, one time in five, a
// cancellation before it.
func (w *rndWorker) waitCtx() (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Duration(100+w.rng.Int64N(int64(rndMaxWait/time.Millisecond)-100))*time.Millisecond)
	if w.rng.IntN(5) != 0 {
		return ctx, cancel
	}
	w.st.add("cancel")
	t := time.AfterFunc(time.Duration(w.rng.Int64N(500))*time.Millisecond, cancel)
	return ctx, func() {
		t.Stop()
		cancel()
	}
}

// hold keeps the lease for up to three pauses of up to a TTL each, Extending it after
// each longer (to 1.2–2.4 TTLs, at most rndMaxExtend) or shorter (to 0.2–0.6 TTL), or not.
func (w *rndWorker) hold(h *held, s rndSpec) {
	for range w.rng.IntN(4) {
		select {
		case <-time.After(time.Duration(w.rng.Int64N(int64(s.TTL)))):
		case <-h.l.Done():
			return
		}
		switch r := w.rng.IntN(10); {
		case r < 4:
			w.extend(h, "extend-longer", min(rndMaxExtend, s.TTL*time.Duration(12+w.rng.IntN(13))/10))
		case r < 7:
			w.extend(h, "extend-shorter", max(dlock.MinTTL, s.TTL*time.Duration(2+w.rng.IntN(5))/10))
		}
	}
}

func (w *rndWorker) extend(h *held, op string, ttl time.Duration) {
	w.st.add(op)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	if err := h.l.Extend(ctx, ttl); err != nil {
		w.st.add(op + "-failed")
	}
}

// rndAdopt records and reports a lease and starts its watcher. A lease taken on a Client
// that was closed meanwhile counts as let go when the Close began.
func (a *agent) rndAdopt(id string, s rndSpec, n, since, at int64, l *dlock.Lease, c *dlock.Client) *held {
	h := &held{l: l, name: s.Names[0]}
	a.mu.Lock()
	a.rnd.live[h] = c
	if at, ok := a.rnd.closedAt[c]; ok {
		h.unlockAt.CompareAndSwap(0, at)
	}
	a.mu.Unlock()
	token, tokens := l.Token(), maps.Clone(l.Tokens())
	if a.cfg.Mutation == mutTokenBack {
		token = 1
		for k := range tokens {
			tokens[k] = 1
		}
	}
	a.emit(event{Ev: evAcquired, ID: id, Lock: s.Kind, Names: s.Names, Token: token, Tokens: tokens,
		Since: since, At: at, Valid: l.ValidUntil().UnixNano(), N: n, Size: s.Size})
	a.watchers.Go(func() { a.rndWatch(id, h, s) })
	return h
}

// rndWatch reports the end of a lease: the earlier of the moment its holder let go of it
// and the moment it ended, and its last ValidUntil. The overhold mutation reports both a
// TTL later, as a holder that believes in its lease past its end.
func (a *agent) rndWatch(id string, h *held, s rndSpec) {
	<-h.l.Done()
	at := time.Now().UnixNano()
	if t := h.unlockAt.Load(); t != 0 && t < at {
		at = t
	}
	valid := h.l.ValidUntil().UnixNano()
	a.mu.Lock()
	delete(a.rnd.live, h)
	a.mu.Unlock()
	if a.cfg.Mutation == mutOverhold {
		at, valid = at+int64(s.TTL), valid+int64(s.TTL)
	}
	how := endLost
	if errors.Is(h.l.Err(), dlock.ErrReleased) {
		how = endReleased
	}
	a.emit(event{Ev: evEnded, ID: id, Name: h.name, At: at, Valid: valid, Err: how})
}

// failKind names why an acquisition failed, for the counts.
func failKind(err error) string {
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	return cmp.Or(kindOf(err), "other")
}
