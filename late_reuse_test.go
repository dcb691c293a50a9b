package dlock_test

import (
	"context"
	"errors"
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/faultproxy"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// The engine reuses what a poll of one deployment wrote its call and reply into (its
// votes, and the call's arguments) once the one reply was counted, and the channel the
// reply came on. The tests below send every request of one process through proxies that
// delay the replies, so that its callers give up before the replies come, on each path
// a reply takes back: a lane's worker, the caller's own round trip (a client with
// ContextTimeoutEnabled), a round trip with the owner's label ahead of the call, a
// quorum of one node and a Cluster. Whatever comes late must not be taken for the reply
// to a later call, nor let two holders in.

// slowProcess is a dlock Client whose every connection passes through proxies, and a
// Client of another process on the same deployment, whose connections do not.
type slowProcess struct {
	c, other *dlock.Client
	proxies  []*faultproxy.Proxy
}

// delay delays every reply to the slow process by latency, give or take jitter.
func (p slowProcess) delay(t *testing.T, latency, jitter time.Duration) {
	t.Helper()
	for _, px := range p.proxies {
		px.SetJitter(t, latency, jitter)
	}
}

// slowPath is one way a slow process may talk to its deployment. With labelled, each
// round's attempt takes a longer lease than the last, so that its owner label is due
// again (owner.go) and goes out ahead of it, in its round trip.
type slowPath struct {
	name     string
	start    func(t *testing.T) slowProcess
	labelled bool
}

// slowPaths are the paths a reply takes back to its poll.
var slowPaths = []slowPath{
	{"lane worker", func(t *testing.T) slowProcess { return slowStandalone(t, false, false) }, false},
	{"own round trip", func(t *testing.T) slowProcess { return slowStandalone(t, true, false) }, false},
	{"owner label ahead", func(t *testing.T) slowProcess {
		return slowStandalone(t, false, false, dlock.WithOwner("late-owner"))
	}, true},
	{"quorum of one", func(t *testing.T) slowProcess { return slowStandalone(t, false, true) }, false},
	{"quorum of one, own round trip", func(t *testing.T) slowProcess { return slowStandalone(t, true, true) }, false},
	{"cluster", func(t *testing.T) slowProcess { return slowCluster(t, false) }, false},
	{"cluster, own round trip", func(t *testing.T) slowProcess { return slowCluster(t, true) }, false},
}

// slowStandalone is a slow process on one server: a client with ContextTimeoutEnabled if
// bounded (a lone caller then sends its own round trip), through NewQuorum if quorum.
func slowStandalone(t *testing.T, bounded, quorum bool, opts ...dlock.Option) slowProcess {
	t.Helper()
	srv, rdb := standalone(t)
	px, via := behindProxy(t, srv, redis.Options{ContextTimeoutEnabled: bounded})
	p := slowProcess{other: newClient(t, rdb), proxies: []*faultproxy.Proxy{px}}
	if !quorum {
		p.c = newClient(t, via, opts...)
		return p
	}
	p.c = newQuorumClient(t, []redis.UniversalClient{via}, opts...)
	return p
}

// slowCluster is a slow process on a Cluster of 3 masters: its cluster client dials each
// master through a proxy of its own (the slot map names the masters' own addresses).
func slowCluster(t *testing.T, bounded bool) slowProcess {
	t.Helper()
	cl := redistest.StartCluster(t, 3)
	via := map[string]string{}
	var proxies []*faultproxy.Proxy
	for _, s := range cl.Servers {
		px := faultproxy.New(t, s.Addr)
		via[s.Addr] = px.Addr
		proxies = append(proxies, px)
	}
	opts := cl.Options()
	opts.ContextTimeoutEnabled = bounded
	var d net.Dialer
	opts.Dialer = func(ctx context.Context, network, addr string) (net.Conn, error) {
		if to, ok := via[addr]; ok {
			addr = to
		}
		return d.DialContext(ctx, network, addr)
	}
	slow := redis.NewClusterClient(opts)
	t.Cleanup(func() { _ = slow.Close() })
	return slowProcess{c: newClient(t, slow), other: newClient(t, cl.Client(t)), proxies: proxies}
}

// TestAbandonedReplyNeverAnswersLaterCall: the reply to a call whose caller gave up
// before it came is never taken for the reply to a later call of the same process, on
// every path a reply takes back. An attempt given up before its reply came (its lock was
// free, so the reply is a grant) is followed by an Unlock given up the same way, then by
// a TryLock of a lock another process holds, which must be refused (taking the late
// grant for its own would let it in), and by an Unlock of a lease of the slow process,
// which must release its key.
func TestAbandonedReplyNeverAnswersLaterCall(t *testing.T) {
	for _, path := range slowPaths {
		t.Run(path.name, func(t *testing.T) {
			p := path.start(t)
			ctx := ctxTimeout(t, 60*time.Second)
			held := mustLock(t, p.other.Mutex("abandoned-held"), ctx)
			defer held.Unlock(ctx)
			mustLock(t, p.c.Mutex("abandoned-warm"), ctx).Unlock(ctx) // the connections are open
			for i := range 3 {
				p.delay(t, 150*time.Millisecond, 0)
				gaveUp, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
				ttl := 10 * time.Second
				if path.labelled {
					ttl = time.Duration(i+1) * time.Minute
				}
				_, err := p.c.Mutex("abandoned-free", dlock.TTL(ttl)).Lock(gaveUp)
				cancel()
				if !errors.Is(err, context.DeadlineExceeded) {
					t.Fatalf("round %d: Lock that gave up = %v, want DeadlineExceeded", i, err)
				}
				unlocked := mustLock(t, p.c.Mutex("abandoned-unlock-"+strconv.Itoa(i)), ctx)
				gaveUp, cancel = context.WithTimeout(ctx, 30*time.Millisecond)
				err = unlocked.Unlock(gaveUp) // its reply comes after the caller gave up
				cancel()
				if err == nil {
					t.Fatalf("round %d: an Unlock whose reply came after its context ended succeeded", i)
				}
				if l, err := p.c.Mutex("abandoned-held").TryLock(ctx); err == nil {
					_ = l.Unlock(ctx)
					t.Fatalf("round %d: TryLock of a lock another process holds succeeded", i)
				} else if !errors.Is(err, dlock.ErrNotAcquired) {
					t.Fatalf("round %d: TryLock = %v, want ErrNotAcquired", i, err)
				}
				p.delay(t, 0, 0)
				mine := mustLock(t, p.c.Mutex("abandoned-mine-"+strconv.Itoa(i)), ctx)
				if err := mine.Unlock(ctx); err != nil {
					t.Fatalf("round %d: Unlock after a late reply: %v", i, err)
				}
				if l, err := p.other.Mutex("abandoned-mine-" + strconv.Itoa(i)).TryLock(ctx); err != nil {
					t.Fatalf("round %d: the lock the slow process unlocked is still held: %v", i, err)
				} else {
					_ = l.Unlock(ctx)
				}
			}
		})
	}
}

// TestLateRepliesNeverLetTwoHoldersIn: two processes lock the same few names over and
// over, one of them through proxies that delay its replies by a random time, with a
// context that often ends before its reply comes (its attempts, and some of its
// Unlocks, are abandoned and answered late). At no time do two leases of one name, of
// either process, hold at once.
func TestLateRepliesNeverLetTwoHoldersIn(t *testing.T) {
	for _, path := range slowPaths {
		t.Run(path.name, func(t *testing.T) {
			p := path.start(t)
			p.delay(t, 30*time.Millisecond, 25*time.Millisecond)
			ctx := ctxTimeout(t, 60*time.Second)
			var names [3]atomic.Int32 // holders of each name now
			var grants, overlaps atomic.Int64
			stop := time.Now().Add(2 * time.Second)
			var wg sync.WaitGroup
			for g := range 6 {
				c := p.c
				if g%2 == 1 {
					c = p.other
				}
				wg.Go(func() {
					for time.Now().Before(stop) {
						i := rand.IntN(len(names))
						if lockBriefly(ctx, c, "overlap-"+strconv.Itoa(i), &names[i], &overlaps) {
							grants.Add(1)
						}
					}
				})
			}
			wg.Wait()
			if n := overlaps.Load(); n > 0 {
				t.Fatalf("%d times two leases of one name held at once (of %d grants)", n, grants.Load())
			}
			if grants.Load() == 0 {
				t.Fatal("no Lock succeeded: the test tested nothing")
			}
		})
	}
}

// lockBriefly locks name on c with a context that may end before the reply comes, holds
// it for a moment counted in holders (overlaps counts a second holder), and unlocks it,
// with a context that may end early too. It reports whether the Lock succeeded.
func lockBriefly(ctx context.Context, c *dlock.Client, name string, holders *atomic.Int32, overlaps *atomic.Int64) bool {
	lockCtx, cancel := context.WithTimeout(ctx, time.Duration(5+rand.IntN(80))*time.Millisecond)
	defer cancel()
	l, err := c.Mutex(name, dlock.TTL(10*time.Second)).Lock(lockCtx)
	if err != nil {
		return false
	}
	if holders.Add(1) > 1 {
		overlaps.Add(1)
	}
	time.Sleep(time.Millisecond)
	holders.Add(-1)
	unlockCtx, cancel := context.WithTimeout(ctx, time.Duration(5+rand.IntN(200))*time.Millisecond)
	defer cancel()
	_ = l.Unlock(unlockCtx)
	return true
}

// TestOwnRoundTripEndsWithTheLockContext: a Lock on a client that ends its socket reads
// at the context's deadline (ContextTimeoutEnabled), whose caller sends its own round
// trip, ends with its ctx on a hung server, also when its owner label is due and rides
// ahead of the attempt (a longer lease than the label covers). A round trip lasts until
// the latest deadline of its calls (internal/batch), and the label's write had one of its
// own, the per-node timeout (a second here), which held the caller that long past its ctx;
// through a slow link it even returned a lease after its ctx had ended.
func TestOwnRoundTripEndsWithTheLockContext(t *testing.T) {
	srv, _ := standalone(t)
	o := srv.Options()
	o.ContextTimeoutEnabled = true
	o.ReadTimeout = 3 * time.Second // longer than the label's write may take (nodeTimeout)
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	c := newClient(t, rdb)
	ctx := ctxTimeout(t, 30*time.Second)
	for _, tc := range []struct {
		name string
		ttl  time.Duration
	}{{"label not due", 10 * time.Second}, {"label due", time.Minute}} {
		t.Run(tc.name, func(t *testing.T) {
			// The connection open and the lane idle, as the Lock of an idle process finds
			// them: its caller sends its own round trip.
			mustLock(t, c.Mutex("bounded-warm", dlock.TTL(10*time.Second)), ctx).Unlock(ctx)
			srv.Pause(t)
			defer srv.Resume(t)
			const within = 30 * time.Millisecond
			gaveUp, cancel := context.WithTimeout(ctx, within)
			defer cancel()
			start := time.Now()
			_, err := c.Mutex("bounded-"+tc.name, dlock.TTL(tc.ttl)).Lock(gaveUp)
			if took := time.Since(start); !errors.Is(err, context.DeadlineExceeded) || took > within+300*time.Millisecond {
				t.Fatalf("Lock with a %v context on a hung server = %v after %v (ReadTimeout %v)", within, err, took, o.ReadTimeout)
			}
		})
	}
}
