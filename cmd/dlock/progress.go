package main

import (
	"fmt"
	"io"
	"time"
)

// progress shows how a long step advances: on a terminal, one line rewritten in place
// every progressEvery; elsewhere, one plain line when the step starts.
type progress struct {
	w    io.Writer
	tty  bool
	stop chan struct{}
	done chan struct{}
}

const progressEvery = 100 * time.Millisecond

// start begins a step; status returns the text after the label, such as "12 of 50 sold".
func (p *progress) start(label string, status func() string) {
	if !p.tty {
		fmt.Fprintf(p.w, "%s ...\n", label)
		return
	}
	p.stop, p.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(p.done)
		t := time.NewTicker(progressEvery)
		defer t.Stop()
		for {
			fmt.Fprintf(p.w, "\r\033[K%s: %s", label, status())
			select {
			case <-t.C:
			case <-p.stop:
				fmt.Fprint(p.w, "\r\033[K")
				return
			}
		}
	}()
}

// end ends the step and clears the line.
func (p *progress) end() {
	if p.stop == nil {
		return
	}
	close(p.stop)
	<-p.done
	p.stop, p.done = nil, nil
}
