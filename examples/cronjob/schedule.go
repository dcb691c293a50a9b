package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock/examples/internal/exredis"
)

// tickResult says which hosts ran a tick's job and which missed the tick.
type tickResult struct {
	ran, missed []string
}

// schedule starts hosts host processes (this program's own binary, with hostEnv set),
// waits until each is connected, gives them a common start and returns, per tick, who
// ran the job.
func schedule(ctx context.Context, srv *exredis.Server, hosts int, every time.Duration, ticks int, withLock bool) ([]tickResult, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this program to start the hosts: %w", err)
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute+time.Duration(ticks)*every) // the example never hangs
	defer cancel()
	run := rand.Text()[:8] // this run's keys in Redis

	procs := make([]*hostProc, hosts)
	defer func() { // on an early return: stop and reap the hosts
		cancel()
		for _, p := range procs {
			if p != nil {
				p.wait()
			}
		}
	}()
	for i := range procs {
		cfg := hostConfig{Name: "host-" + strconv.Itoa(i+1), Redis: srv.URL, Run: run, Every: every, Ticks: ticks, Lock: withLock}
		if procs[i], err = startHost(ctx, exe, cfg); err != nil {
			return nil, err
		}
	}
	for _, p := range procs {
		select {
		case <-p.out.ready:
		case <-p.exited:
			return nil, p.failure()
		case <-ctx.Done():
			return nil, fmt.Errorf("%s did not start: %w", p.cfg.Name, ctx.Err())
		}
	}
	start := time.Now().Add(100 * time.Millisecond)
	for _, p := range procs {
		if err := p.begin(start); err != nil {
			return nil, err
		}
	}
	var errs []error
	for _, p := range procs {
		if err := p.wait(); err != nil {
			errs = append(errs, p.failure())
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	rdb := srv.NewClient()
	defer rdb.Close()
	results := make([]tickResult, ticks)
	for i := range results {
		ran, err := rdb.LRange(ctx, ranKey(run, i), 0, -1).Result()
		if err != nil {
			return nil, err
		}
		missed, err := rdb.LRange(ctx, missedKey(run, i), 0, -1).Result()
		if err != nil {
			return nil, err
		}
		results[i] = tickResult{ran: ran, missed: missed}
		if err := rdb.Del(ctx, ranKey(run, i), missedKey(run, i)).Err(); err != nil {
			return nil, err
		}
	}
	return results, nil
}

// hostProc is a running host process.
type hostProc struct {
	cfg    hostConfig
	cmd    *exec.Cmd
	out    *hostOutput
	stdin  io.WriteCloser
	exited chan struct{}
	err    error // how it ended: set before exited is closed
}

func startHost(ctx context.Context, exe string, cfg hostConfig) (*hostProc, error) {
	b, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), hostEnv+"="+string(b))
	out := &hostOutput{ready: make(chan struct{})}
	cmd.Stdout, cmd.Stderr = out, out
	cmd.WaitDelay = time.Second
	stdin, err := cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cfg.Name, err)
	}
	p := &hostProc{cfg: cfg, cmd: cmd, out: out, stdin: stdin, exited: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

// begin tells the host when the schedule starts.
func (p *hostProc) begin(start time.Time) error {
	_, err := fmt.Fprintf(p.stdin, "%d\n", start.UnixNano())
	p.stdin.Close()
	if err != nil {
		return fmt.Errorf("%s: %w", p.cfg.Name, err)
	}
	return nil
}

// wait waits for the host to exit and returns how it ended.
func (p *hostProc) wait() error {
	<-p.exited
	return p.err
}

// failure describes how the host ended, with its output.
func (p *hostProc) failure() error {
	<-p.exited
	return fmt.Errorf("%s: %v; its output:\n%s", p.cfg.Name, p.err, p.out.String())
}

// hostOutput collects a host's output and closes ready when the host says "ready".
type hostOutput struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	ready chan struct{}
	said  bool
}

func (o *hostOutput) Write(b []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.buf.Write(b)
	if !o.said && bytes.Contains(o.buf.Bytes(), []byte("ready\n")) {
		o.said = true
		close(o.ready)
	}
	return len(b), nil
}

func (o *hostOutput) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.buf.String()
}
