package faults

import (
	"context"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	"github.com/seed51c676c8/dlock"
)

// extendRace holds cmd.N locks (cmd.Name plus a digit) at once, each on a goroutine and a
// Client of its own (so that no renewal is moved to share a batch), for cmd.Wait. Each
// lease alternates Extend(cmd.TTL) and, a third of a TTL later, when its renewal falls
// due, the pair Extend(cmd.TTL) and Extend(cmd.Short) (extendPair), then waits for the
// short TTL to run out twice over. A sampler per lease reports evDiverged when the lease
// still believes in itself while a majority of the nodes no longer has its key; the
// lease then stops extending, so that another client can take the lock before the lease
// notices.
func (a *agent) extendRace(cmd command) {
	until := time.Now().Add(cmd.Wait)
	var diverged atomic.Int64
	var wg sync.WaitGroup
	for i := range cmd.N {
		name := cmd.Name + string(rune('0'+i))
		wg.Go(func() {
			c, err := a.newClient()
			if err != nil {
				a.fail(cmd, err)
				return
			}
			defer c.Close()
			for time.Now().Before(until) {
				a.raceOnce(c, cmd, name, until, &diverged)
			}
		})
	}
	wg.Wait()
	a.emit(event{Ev: evDone, ID: cmd.ID, Op: cmd.Op, N: diverged.Load()})
}

// raceOnce takes name and races its renewals with Extends until the lease ends or until.
func (a *agent) raceOnce(c *dlock.Client, cmd command, name string, until time.Time, diverged *atomic.Int64) {
	var l *dlock.Lease
	err := bounded(10*cmd.TTL, func(ctx context.Context) (err error) {
		l, err = c.Mutex(name, dlock.TTL(cmd.TTL)).Lock(ctx)
		return err
	})
	if err != nil {
		time.Sleep(cmd.TTL / 10)
		return
	}
	h := a.adopt(command{ID: name + "." + time.Now().Format("05.000000"), Name: name}, l)
	var quiet atomic.Int64 // while diverged: extend no more until this time
	var stop atomic.Bool   // the lease is about to be unlocked: the sampler must not look
	go a.sample(l, name, &quiet, &stop, diverged)
	for l.Err() == nil && time.Now().Before(until) {
		if time.Now().UnixNano() < quiet.Load() {
			time.Sleep(time.Millisecond)
			continue
		}
		start := time.Now()
		if extend(l, cmd.TTL) != nil {
			break
		}
		jitter := time.Duration(rand.Int64N(int64(2*time.Millisecond))) - time.Millisecond
		time.Sleep(time.Until(start.Add(cmd.TTL/3 + jitter)))
		if time.Now().UnixNano() >= quiet.Load() {
			extendPair(l, cmd.TTL, cmd.Short)
			time.Sleep(2 * cmd.Short) // let a key that Redis keeps shorter than believed run out
		}
	}
	stop.Store(true)
	h.seen(time.Now()) // a lease found ended here ended no later than now
	if l.Err() == nil {
		h.unlockAt.Store(time.Now().UnixNano())
		_ = bounded(cmd.TTL, l.Unlock)
	}
}

// bounded runs f with a context that ends after d.
func bounded(d time.Duration, f func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	return f(ctx)
}

// extendPair calls Extend(long) and, while it is in flight, Extend(short), as two
// goroutines of a holder might. The second waits behind the first on the lock's pipeline
// lane for a round trip, while a renewal due now goes out on a pipeline of its own.
func extendPair(l *dlock.Lease, long, short time.Duration) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = extend(l, long)
	}()
	time.Sleep(20 * time.Microsecond) // let the long one go first
	_ = extend(l, short)
	<-done
}

// extend extends l to ttl, bounded by the old TTL's worth of waiting.
func extend(l *dlock.Lease, ttl time.Duration) error {
	return bounded(time.Second, func(ctx context.Context) error { return l.Extend(ctx, ttl) })
}

// sample looks, every 2ms until the lease ends, for the lease believing in a key that a
// majority of the nodes no longer has; it reports the first time (evDiverged) and keeps
// the lease from extending until its belief has run out. N in the event is how many
// nodes still had the key.
func (a *agent) sample(l *dlock.Lease, name string, quiet *atomic.Int64, stop *atomic.Bool, diverged *atomic.Int64) {
	need := len(a.nodes)/2 + 1
	for l.Err() == nil && !stop.Load() {
		time.Sleep(2 * time.Millisecond)
		vu := l.ValidUntil()
		have := 0
		for _, n := range a.nodes {
			if k, err := n.Exists(context.Background(), lockKey(name)).Result(); err == nil && k == 1 {
				have++
			}
		}
		now := time.Now()
		if stop.Load() {
			return
		}
		if have >= need || l.Err() != nil || !l.ValidUntil().Equal(vu) || !vu.After(now.Add(time.Millisecond)) {
			continue
		}
		quiet.Store(vu.Add(50 * time.Millisecond).UnixNano())
		diverged.Add(1)
		a.emit(event{Ev: evDiverged, Name: name, Valid: vu.UnixNano(), At: now.UnixNano(), N: int64(have)})
		return
	}
}
