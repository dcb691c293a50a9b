package observe_test

import (
	"errors"
	"fmt"
	"sync"

	"github.com/seed51c676c8/dlock/observe"
)

// losses counts lost holds by cause and the attempts that found a lock held. Its methods
// may be called from many goroutines at once, and return at once.
type losses struct {
	mu      sync.Mutex
	byCause map[observe.LossCause]int
	held    int
}

func (l *losses) observer() observe.Observer {
	return observe.Observer{
		Attempted: func(a observe.Attempt) {
			if a.Verdict == observe.VerdictHeld {
				l.mu.Lock()
				l.held++
				l.mu.Unlock()
			}
		},
		HoldEnded: func(e observe.HoldEnd) {
			if e.Cause == observe.NotLost {
				return
			}
			l.mu.Lock()
			l.byCause[e.Cause]++
			l.mu.Unlock()
		},
	}
}

func ExampleObserver() {
	l := &losses{byCause: make(map[observe.LossCause]int)}
	obs := l.observer()
	// A Client sends the events: dlock.New(rdb, dlock.WithObserver(obs)). Here they
	// are sent by hand, as a test of an Observer would; the nil fields are not called.
	obs.Attempted(observe.Attempt{Name: "report", Kind: "mutex", Verdict: observe.VerdictHeld})
	obs.Attempted(observe.Attempt{Name: "report", Kind: "mutex", Verdict: observe.VerdictAcquired})
	obs.HoldEnded(observe.HoldEnd{Name: "report", Kind: "mutex", Cause: observe.NotLost})
	obs.HoldEnded(observe.HoldEnd{Name: "report", Kind: "mutex", Err: errors.New("lost"), Cause: observe.LossTaken})
	fmt.Println("renewals observed:", obs.Renewal != nil)
	fmt.Println("found held:", l.held)
	fmt.Println("lost:", l.byCause)
	// Output:
	// renewals observed: false
	// found held: 1
	// lost: map[taken:1]
}

func ExampleVerdict_String() {
	for _, v := range []observe.Verdict{observe.VerdictAcquired, observe.VerdictHeld, observe.VerdictSplit, observe.VerdictLate, observe.VerdictFailed} {
		fmt.Println(int(v), v)
	}
	// Output:
	// 0 acquired
	// 1 held
	// 2 split
	// 3 late
	// 4 failed
}

func ExampleLossCause_String() {
	for _, c := range []observe.LossCause{observe.NotLost, observe.LossExpired, observe.LossTaken, 7} {
		fmt.Println(int(c), c)
	}
	// Output:
	// 0 released
	// 1 expired
	// 2 taken
	// 7 unknown
}
