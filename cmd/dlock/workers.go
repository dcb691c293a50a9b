package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"
)

// The demo and the bench run their buyers and workers as copies of this binary, started
// with a hidden command. The protocol is lines of text:
//   - the worker prints "ready" once connected, and waits for a line "go" on stdin, so
//     that all start together;
//   - it prints what the command defines ("paused N", "done {json}");
//   - it exits when its stdin closes: the parent is gone.
// The servers' URLs go through the environment (workerServersEnv), not the command line,
// so that passwords do not show in ps.

// workerServersEnv carries the server URLs to worker processes, one per line.
const workerServersEnv = "DLOCK_WORKER_REDIS"

// workerStartTimeout bounds how long a worker may take to say "ready".
const workerStartTimeout = 30 * time.Second

// worker is the parent's handle on one worker process.
type worker struct {
	name   string
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	lines  chan string // its stdout, line by line; closed at EOF
	stderr lockedBuffer
	done   chan struct{} // closed once the process has exited
}

// startWorker starts this binary with args, the servers' URLs in its environment.
func startWorker(name string, args []string, urls []string) (*worker, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("cannot find dlock's own binary to start %s: %v", name, err)
	}
	w := &worker{name: name, lines: make(chan string, 16), done: make(chan struct{})}
	w.cmd = exec.Command(exe, args...)
	w.cmd.Env = append(withoutVars(os.Environ(), workerServersEnv, "DLOCK_REDIS"), workerServersEnv+"="+strings.Join(urls, "\n"))
	w.cmd.Stderr = &w.stderr
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	stdout, err := w.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := w.cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start %s: %v", name, err)
	}
	go func() {
		r := bufio.NewReader(stdout)
		for {
			line, err := r.ReadString('\n')
			if line = strings.TrimRight(line, "\n"); line != "" {
				w.lines <- line
			}
			if err != nil {
				break
			}
		}
		close(w.lines)
		_ = w.cmd.Wait()
		close(w.done)
	}()
	return w, nil
}

// expect waits for the next line that starts with prefix, skipping others, and returns
// the rest of it.
func (w *worker) expect(ctx context.Context, prefix string) (string, error) {
	for {
		select {
		case line, ok := <-w.lines:
			if !ok {
				<-w.done
				return "", w.failure(fmt.Sprintf("exited before it said %q", prefix))
			}
			if rest, ok := strings.CutPrefix(line, prefix); ok {
				return strings.TrimSpace(rest), nil
			}
		case <-ctx.Done():
			return "", w.failure(fmt.Sprintf("did not say %q in time", prefix))
		}
	}
}

// failure describes what went wrong with the worker, with the end of its stderr.
func (w *worker) failure(what string) error {
	msg := fmt.Sprintf("%s %s", w.name, what)
	if ps := w.cmd.ProcessState; ps != nil {
		msg += fmt.Sprintf(" (%v)", ps)
	}
	if tail := strings.TrimSpace(w.stderr.String()); tail != "" {
		if len(tail) > 2000 {
			tail = "..." + tail[len(tail)-2000:]
		}
		msg += ": " + tail
	}
	return errors.New(msg)
}

// send writes one line to the worker's stdin.
func (w *worker) send(line string) error {
	_, err := io.WriteString(w.stdin, line+"\n")
	return err
}

// kill stops the worker for good, even a stopped one, and waits for it.
func (w *worker) kill() {
	_ = w.cmd.Process.Kill()
	_ = resume(w.cmd.Process)
	_ = w.stdin.Close()
	for range w.lines {
	}
	<-w.done
}

// startAll starts workers and waits until each says "ready".
func startAll(ctx context.Context, names []string, args func(i int) []string, urls []string) ([]*worker, error) {
	var ws []*worker
	for i, name := range names {
		w, err := startWorker(name, args(i), urls)
		if err != nil {
			killAll(ws)
			return nil, err
		}
		ws = append(ws, w)
	}
	ctx, cancel := context.WithTimeout(ctx, workerStartTimeout)
	defer cancel()
	for _, w := range ws {
		if _, err := w.expect(ctx, "ready"); err != nil {
			killAll(ws)
			return nil, err
		}
	}
	return ws, nil
}

// goAll tells every worker to start.
func goAll(ws []*worker) error {
	for _, w := range ws {
		if err := w.send("go"); err != nil {
			return w.failure("did not take its start signal")
		}
	}
	return nil
}

func killAll(ws []*worker) {
	for _, w := range ws {
		w.kill()
	}
}

// lockedBuffer is a bytes.Buffer safe for one writer and concurrent readers.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// workerSide is the worker's end of the protocol.
type workerSide struct {
	out   io.Writer
	mu    sync.Mutex
	lines chan string // lines from the parent after "go"
}

// ready says "ready" and waits for "go" on stdin. After that, the lines the parent sends
// arrive on lines, and the process exits when stdin closes (the parent is gone), so that
// no worker outlives its parent for long.
func (ws *workerSide) ready(stdin io.Reader) error {
	ws.say("ready")
	r := bufio.NewReader(stdin)
	line, err := r.ReadString('\n')
	if err != nil || strings.TrimSpace(line) != "go" {
		return errors.New("the parent process went away before the start")
	}
	ws.lines = make(chan string, 16)
	go func() {
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				os.Exit(exitFailure)
			}
			ws.lines <- strings.TrimSpace(line)
		}
	}()
	return nil
}

// wait waits for the line want from the parent.
func (ws *workerSide) wait(ctx context.Context, want string) error {
	for {
		select {
		case line := <-ws.lines:
			if line == want {
				return nil
			}
		case <-ctx.Done():
			return fmt.Errorf("the parent did not say %q in time", want)
		}
	}
}

// say prints one line for the parent.
func (ws *workerSide) say(format string, args ...any) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	fmt.Fprintf(ws.out, format+"\n", args...)
}

// workerServers reads the servers from workerServersEnv.
func workerServers(c *cli, cluster bool) (*servers, error) {
	urls := strings.Split(strings.TrimSpace(c.getenv(workerServersEnv)), "\n")
	return parseServers(urls, cluster, nil, c.red) // the URLs carry the TLS flags
}
