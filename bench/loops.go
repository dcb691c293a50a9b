package main

import (
	"sync"
	"sync/atomic"
	"time"
)

// loops runs op on n goroutines, g = 0 … n-1: once each to warm up (connections,
// scripts), then, once every warm-up is done and started has run (a caller reads its
// counters there), op(g) in a loop for window. It returns the ops done in the loops, the
// time from their start to the end of the last op, and the first error of any op, after
// which that goroutine stops.
func loops(n int, window time.Duration, op func(g int) error, started func()) (ops int64, elapsed time.Duration, err error) {
	var (
		done     atomic.Int64
		stop     atomic.Bool
		errOnce  sync.Once
		ready    sync.WaitGroup
		finished sync.WaitGroup
	)
	fail := func(e error) { errOnce.Do(func() { err = e }) }
	start := make(chan struct{})
	ready.Add(n)
	for g := range n {
		finished.Go(func() {
			e := op(g)
			ready.Done()
			if e != nil {
				fail(e)
				return
			}
			<-start
			var local int64
			for !stop.Load() {
				if e := op(g); e != nil {
					fail(e)
					break
				}
				local++
			}
			done.Add(local)
		})
	}
	ready.Wait()
	started()
	t0 := time.Now()
	close(start)
	time.Sleep(window)
	stop.Store(true)
	finished.Wait()
	return done.Load(), time.Since(t0), err
}
