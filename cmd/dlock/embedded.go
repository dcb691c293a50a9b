package main

import (
	"fmt"
	"time"

	"github.com/alicebob/miniredis/v2"
)

// embedded is an in-process Redis (miniredis) on a loopback port, for the demo and the
// bench when no server is given. Worker processes connect to it over loopback.
type embedded struct {
	mr   *miniredis.Miniredis
	stop chan struct{}
	done chan struct{}
}

// clockStep is how often, and by how much, the embedded Redis's clock is advanced:
// miniredis expires keys only when told that time has passed.
const clockStep = 10 * time.Millisecond

// startEmbedded starts miniredis on 127.0.0.1 and a goroutine that advances its clock.
func startEmbedded() (*embedded, error) {
	mr := miniredis.NewMiniRedis()
	if err := mr.StartAddr("127.0.0.1:0"); err != nil {
		return nil, fmt.Errorf("cannot start the embedded Redis: %w", err)
	}
	e := &embedded{mr: mr, stop: make(chan struct{}), done: make(chan struct{})}
	go e.advanceClock()
	return e, nil
}

func (e *embedded) advanceClock() {
	defer close(e.done)
	t := time.NewTicker(clockStep)
	defer t.Stop()
	for {
		select {
		case <-t.C:
			e.mr.FastForward(clockStep)
		case <-e.stop:
			return
		}
	}
}

// URL is the embedded server's URL.
func (e *embedded) URL() string { return "redis://" + e.mr.Addr() }

// Close stops the clock and the server.
func (e *embedded) Close() {
	close(e.stop)
	<-e.done
	e.mr.Close()
}
