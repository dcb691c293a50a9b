package faults

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/goleak"

	"github.com/seed51c676c8/dlock"
)

// Events of closeLoad.
const (
	evStopped = "stopped" // the load stopped, leaving its leases held
	evLeak    = "leak"    // goroutines left running after Close
)

// closeLoad runs cmd.N goroutines per lock of cmd.Names ("kind:name"), each taking its
// lock, holding it 2ms and releasing it, again and again. After cmd.Wait the load stops,
// leaving the leases it holds (evStopped), and cmd.Every later the agent closes the
// Client, with calls still in flight (the no-close mutation does not). It reports, in
// evDone: Dur, how long Close took; N, the leases that had not ended after Close; M, 1 if
// load goroutines had not returned 2s later; Err, the first error other than the ones
// Close causes. Goroutines left after Close are reported as evLeak.
func (a *agent) closeLoad(cmd command) {
	before := goleak.IgnoreCurrent()
	l := &load{a: a, stop: make(chan struct{})}
	for _, spec := range cmd.Names {
		kind, name, _ := strings.Cut(spec, ":")
		for range cmd.N {
			l.wg.Go(func() { l.loop(command{Kind: kind, Name: name, TTL: cmd.TTL, Size: 2, N: 1}) })
		}
	}
	time.Sleep(cmd.Wait)
	close(l.stop) // the load stops as a program that shuts down does: it leaves its leases to Close
	a.emit(event{Ev: evStopped, ID: cmd.ID})
	time.Sleep(cmd.Every) // while another process starts waiting for them
	done := event{Ev: evDone, ID: cmd.ID, Op: cmd.Op}
	if a.cfg.Mutation != mutNoClose {
		a.mu.Lock()
		a.closed = true
		a.mu.Unlock()
		l.closed.Store(true)
		start := time.Now()
		_ = a.client.Close()
		done.Dur = int64(time.Since(start))
		if _, err := a.client.Mutex("after-close").TryLock(context.Background()); !errors.Is(err, dlock.ErrClosed) {
			l.record(fmt.Errorf("TryLock after Close: %v", err))
		}
	}
	if waitFor(&l.wg, 2*time.Second) {
		done.M = 1
	}
	done.N, done.Err = l.live(), l.firstErr()
	a.emit(done)
	if err := goleak.Find(before); err != nil && a.cfg.Mutation != mutNoClose {
		a.emit(event{Ev: evLeak, ID: cmd.ID, Err: err.Error()})
	}
}

// load is the work closeLoad closes the Client under.
type load struct {
	a      *agent
	stop   chan struct{}
	closed atomic.Bool
	wg     sync.WaitGroup

	mu     sync.Mutex
	leases []holding
	errs   []string
}

func (l *load) loop(cmd command) {
	for !l.stopping() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		lease, err := l.a.acquire(ctx, cmd)
		cancel()
		switch {
		case err == nil:
			l.mu.Lock()
			l.leases = append(l.leases, lease)
			l.mu.Unlock()
			time.Sleep(2 * time.Millisecond)
			if l.stopping() {
				return // left held, for Close
			}
			err = lease.Unlock(context.Background())
			if err != nil && !(l.closed.Load() && errors.Is(err, dlock.ErrNotHeld)) {
				l.record(err)
			}
		case l.closed.Load() && errors.Is(err, dlock.ErrClosed):
			return
		case !errors.Is(err, context.DeadlineExceeded):
			l.record(err)
		}
	}
}

func (l *load) stopping() bool {
	select {
	case <-l.stop:
		return true
	default:
		return false
	}
}

func (l *load) record(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err.Error())
	l.mu.Unlock()
}

func (l *load) firstErr() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) == 0 {
		return ""
	}
	return l.errs[0]
}

// live counts the leases taken that have not ended.
func (l *load) live() int64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := int64(0)
	for _, lease := range l.leases {
		if lease.Err() == nil {
			n++
		}
	}
	return n
}
