package main

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"time"

	"github.com/seed51c676c8/dlock"

	"github.com/seed51c676c8/dlock/examples/internal/exredis"
)

// demo starts the workers, observes the election, kills the first leader, stops the
// workers and checks their steps.
func demo(ctx context.Context, srv *exredis.Server, stdout io.Writer, workers int, ttl, span time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute+span) // the example never hangs
	defer cancel()
	cfg := workerConfig{Redis: srv.URL, Run: rand.Text()[:8], TTL: ttl}
	rdb := srv.NewClient()
	defer rdb.Close()
	client := dlock.New(rdb)
	defer client.Close()
	leaders := client.Election(cfg.election()).Observe(ctx)

	procs, err := startWorkers(ctx, cfg, workers)
	defer stopWorkers(procs)
	if err != nil {
		return err
	}
	start := time.Now()
	w := watcher{out: stdout, start: start, procs: procs}
	if err := w.until(ctx, leaders, start.Add(span/3)); err != nil {
		return err
	}
	victim, ok := w.leading()
	if !ok {
		return errors.New("no worker led by the time the first leader was to be killed")
	}
	killed := time.Now()
	fmt.Fprintf(stdout, "%6.2fs  SIGKILL %s (the leader)\n", time.Since(start).Seconds(), victim)
	_ = procs[victim].Process.Kill()
	if err := w.until(ctx, leaders, start.Add(span)); err != nil {
		return err
	}
	stopWorkers(procs)
	return report(ctx, stdout, rdb, cfg, w, victim, killed, ttl)
}

// watcher prints the leaders that Observe sends, and keeps them.
type watcher struct {
	out     io.Writer
	start   time.Time
	procs   map[string]*exec.Cmd
	changes []change
}

// change is one leader observed: its value (the worker's name) and term, "" for none.
type change struct {
	at     time.Time
	worker string
	term   uint64
}

// until prints every leader observed until end.
func (w *watcher) until(ctx context.Context, leaders <-chan dlock.Leader, end time.Time) error {
	timer := time.NewTimer(time.Until(end))
	defer timer.Stop()
	for {
		select {
		case l, ok := <-leaders:
			if !ok {
				return ctx.Err()
			}
			w.show(l)
		case <-timer.C:
			return nil
		}
	}
}

func (w *watcher) show(l dlock.Leader) {
	at := time.Since(w.start).Seconds()
	switch {
	case errors.Is(l.Err, dlock.ErrNoLeader):
		fmt.Fprintf(w.out, "%6.2fs  observed: no leader\n", at)
		w.changes = append(w.changes, change{at: time.Now()})
	case l.Err != nil:
		fmt.Fprintf(w.out, "%6.2fs  observed: cannot read the election: %v\n", at, l.Err)
	default:
		fmt.Fprintf(w.out, "%6.2fs  observed: %s leads, term %d (owner %s)\n", at, l.Value, l.Token, l.Owner)
		w.changes = append(w.changes, change{at: time.Now(), worker: l.Value, term: l.Token})
	}
}

// leading is the worker that leads as last observed.
func (w *watcher) leading() (string, bool) {
	if len(w.changes) == 0 {
		return "", false
	}
	last := w.changes[len(w.changes)-1]
	return last.worker, last.worker != ""
}

// startWorkers starts the worker processes, by name, and waits until each is connected.
func startWorkers(ctx context.Context, cfg workerConfig, n int) (map[string]*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to start the workers: %w", err)
	}
	procs := make(map[string]*exec.Cmd, n)
	for i := range n {
		c := cfg
		c.Name = "worker-" + strconv.Itoa(i+1)
		cmd, err := startWorker(ctx, exe, c)
		if err != nil {
			return procs, err
		}
		procs[c.Name] = cmd
	}
	return procs, nil
}

// stopWorkers asks every worker still running to stop (SIGTERM: Run's ctx ends, and the
// leader resigns) and reaps them all.
func stopWorkers(procs map[string]*exec.Cmd) {
	for _, cmd := range procs {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Signal(os.Interrupt)
		}
	}
	for _, cmd := range procs {
		if cmd.ProcessState == nil {
			_ = cmd.Wait()
		}
	}
}
