package faults

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock"
)

// rndSpec is one lock the random workload draws from: a kind over names, and the options
// of its handle.
type rndSpec struct {
	Kind    string        `json:"kind"` // mutex, multi, fair, ts, read, write, sem
	Names   []string      `json:"names"`
	TTL     time.Duration `json:"ttl"`
	NoRenew bool          `json:"norenew,omitempty"`
	Size    int64         `json:"size,omitempty"` // sem
}

// rndState is what an agent keeps for the random workload, under agent.mu: its leases
// not yet ended, with the Client that took each, and when each closed Client was closed.
type rndState struct {
	live     map[*held]*dlock.Client
	closedAt map[*dlock.Client]int64
}

func newRndState() rndState {
	return rndState{live: map[*held]*dlock.Client{}, closedAt: map[*dlock.Client]int64{}}
}

// random runs the random workload: cmd.N workers, each drawing one operation after
// another from a generator of its own (seeded with cmd.Seed and its number) until
// cmd.Wait has passed. It reports every acquisition (evWaiting, evAcquired or evFailed,
// evEnded), and last evDone with the operations counted by kind.
func (a *agent) random(cmd command) {
	until := time.Now().Add(cmd.Wait)
	st := &rndStats{counts: map[string]int64{}}
	var wg sync.WaitGroup
	for i := range cmd.N {
		w := &rndWorker{a: a, n: int(i), specs: cmd.Specs, st: st, rng: rand.New(rand.NewPCG(uint64(cmd.Seed), uint64(i)))}
		wg.Go(func() { w.run(until) })
	}
	wg.Wait()
	if a.cfg.Mutation == mutLeak {
		a.leak(cmd.Specs[0].Names[0])
	}
	a.emit(event{Ev: evDone, ID: cmd.ID, Op: cmd.Op, Counts: st.snapshot()})
}

// rndStats counts the operations of an agent's workers.
type rndStats struct {
	mu     sync.Mutex
	counts map[string]int64
}

func (s *rndStats) add(op string) {
	s.mu.Lock()
	s.counts[op]++
	s.mu.Unlock()
}

func (s *rndStats) snapshot() map[string]int64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make(map[string]int64, len(s.counts))
	for k, v := range s.counts {
		out[k] = v
	}
	return out
}

// unsure reports an attempt whose fate the agent does not know: no verdict (its requests
// may still land) or acquired too late, and undone. It may hold its names until it lands
// plus its TTL: the cost every Redlock client has, which the checker excuses as it does a
// fault (rndUnsureFor bounds the TTL and the landing).
func (a *agent) unsure(at dlock.Attempt) {
	if at.Verdict != dlock.VerdictFailed && at.Verdict != dlock.VerdictLate {
		return
	}
	now := time.Now().UnixNano()
	a.emit(event{Ev: evUnsure, Names: strings.Split(at.Name, ","), At: now - int64(at.Duration), End: now + int64(rndUnsureFor)})
}

// rndUnsureFor is how long after its verdict an attempt of unknown fate may hold its names:
// the longest TTL of the workload (rndMaxExtend bounds it) and a round trip's timeout.
const rndUnsureFor = rndMaxExtend + time.Second

// current returns the agent's Client of the moment: a close operation replaces it.
func (a *agent) current() *dlock.Client {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.client
}

// reopen is the close operation: a new Client takes the place of the current one, which
// is closed with the calls still running on it, as a program that restarts its Client.
func (a *agent) reopen() {
	nc, err := a.newClient()
	if err != nil {
		return
	}
	a.mu.Lock()
	old, closed := a.client, a.closed
	if !closed {
		a.client = nc
	}
	a.mu.Unlock()
	if closed {
		_ = nc.Close()
		return
	}
	a.closeMarked(old)
}

// closeMarked closes c, and marks each of its live leases let go at this moment: a lease
// counts as held until its holder lets go of it, and Close is how this one does.
func (a *agent) closeMarked(c *dlock.Client) {
	now := time.Now().UnixNano()
	a.mu.Lock()
	a.rnd.closedAt[c] = now
	for h, hc := range a.rnd.live {
		if hc == c {
			h.unlockAt.CompareAndSwap(0, now)
		}
	}
	a.mu.Unlock()
	_ = c.Close()
}

// leak (the leak mutation) leaves a queue key without expiry behind, as a script that
// forgot its PEXPIRE would.
func (a *agent) leak(name string) {
	ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
	defer cancel()
	_ = a.nodes[0].Set(ctx, fmt.Sprintf("{dlock:%s}:turns", name), "left behind", 0).Err()
}
