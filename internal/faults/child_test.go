package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// agentEnv, when set, makes the test binary an agent (see TestMain); its value is the
// agent's configuration as JSON.
const agentEnv = "DLOCK_FAULTS_AGENT"

// child is one agent process, seen from the parent. It is stopped by its pid (SIGKILL)
// when its run ends, if it has not exited by then.
type child struct {
	r    *run
	name string
	cmd  *exec.Cmd
	log  string // its stderr

	inMu sync.Mutex
	in   io.WriteCloser

	mu       sync.Mutex
	events   []event
	consumed []bool
	changed  chan struct{} // closed and replaced on every new event, and at exit
	exited   bool
	killedAt int64 // wall-clock ns of kill, 0 if not killed
	done     chan struct{}
}

// spawn starts an agent with cfg and waits for it to report ready.
func spawn(r *run, cfg agentConfig) *child {
	r.t.Helper()
	cfg.Mutation = r.mutation
	conf, _ := json.Marshal(cfg)
	c := &child{r: r, name: cfg.Name, changed: make(chan struct{}), done: make(chan struct{})}
	c.log = filepath.Join(r.t.TempDir(), cfg.Name+".log")
	errFile, err := os.Create(c.log)
	if err != nil {
		r.fatalf("agent %s: %v", cfg.Name, err)
	}
	defer errFile.Close()
	c.cmd = exec.Command(os.Args[0], "-test.run=^$")
	c.cmd.Env = append(os.Environ(), agentEnv+"="+string(conf))
	c.cmd.Stderr = errFile
	c.cmd.SysProcAttr = sysProcAttr()
	out, err := c.cmd.StdoutPipe()
	if err != nil {
		r.fatalf("agent %s: %v", cfg.Name, err)
	}
	if c.in, err = c.cmd.StdinPipe(); err != nil {
		r.fatalf("agent %s: %v", cfg.Name, err)
	}
	if err := c.cmd.Start(); err != nil {
		r.fatalf("agent %s: %v", cfg.Name, err)
	}
	r.t.Cleanup(c.stop)
	go c.read(out)
	c.await(func(e event) bool { return e.Ev == evReady })
	return c
}

// read collects the agent's events until its stdout closes, then reaps it.
func (c *child) read(out io.Reader) {
	sc := bufio.NewScanner(out)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			e = event{Ev: "garbage", Err: sc.Text()}
		}
		e.Proc = c.name
		c.mu.Lock()
		c.events = append(c.events, e)
		c.consumed = append(c.consumed, false)
		c.notifyLocked()
		c.mu.Unlock()
	}
	_ = c.cmd.Wait()
	c.mu.Lock()
	c.exited = true
	c.notifyLocked()
	c.mu.Unlock()
	close(c.done)
}

func (c *child) notifyLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// send writes one command to the agent.
func (c *child) send(cmd command) {
	data, _ := json.Marshal(cmd)
	c.inMu.Lock()
	defer c.inMu.Unlock()
	if _, err := c.in.Write(append(data, '\n')); err != nil {
		c.r.fatalf("agent %s: send %s: %v%s", c.name, cmd.Op, err, c.stderrTail())
	}
}

// await returns the first event not returned before that matches, waiting for it until
// the run's limit; it fails the run if the agent exits or the limit passes first.
func (c *child) await(match func(event) bool) event {
	c.r.t.Helper()
	e, why := c.next(match, nil)
	if why != "" {
		c.r.fatalf("agent %s: no awaited event: %s%s", c.name, why, c.stderrTail())
	}
	return e
}

// awaitWithin is await bounded by d: it reports false if nothing matched in time.
func (c *child) awaitWithin(d time.Duration, match func(event) bool) (event, bool) {
	c.r.t.Helper()
	e, why := c.next(match, time.After(d))
	return e, why == ""
}

// next returns the first unreturned event that matches, or why there is none: the agent
// exited, the timeout fired, the run's limit passed.
func (c *child) next(match func(event) bool, timeout <-chan time.Time) (event, string) {
	for {
		c.mu.Lock()
		for i, e := range c.events {
			if !c.consumed[i] && match(e) {
				c.consumed[i] = true
				c.mu.Unlock()
				return e, ""
			}
		}
		exited, changed := c.exited, c.changed
		c.mu.Unlock()
		if exited {
			return event{}, fmt.Sprintf("it exited (%v)", c.cmd.ProcessState)
		}
		select {
		case <-changed:
		case <-timeout:
			return event{}, "timed out"
		case <-c.r.ctx.Done():
			return event{}, "the run's time limit passed"
		}
	}
}

// awaitEv awaits the event ev about id, or the failure of the command on id, and
// returns it; a failure is returned, not fatal.
func (c *child) awaitEv(ev, id string) event {
	c.r.t.Helper()
	return c.await(func(e event) bool { return e.ID == id && (e.Ev == ev || e.Ev == evFailed) })
}

// history returns a copy of every event so far.
func (c *child) history() []event {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]event(nil), c.events...)
}

// pause stops the agent (SIGSTOP, by pid): its timers, renewals and goroutines all stop,
// as in a long GC pause or a frozen VM.
func (c *child) pause() { c.signal(sigStop) }

// resume continues a paused agent (SIGCONT).
func (c *child) resume() { c.signal(sigCont) }

// kill kills the agent (SIGKILL, by pid) and waits for it; its leases end at that instant.
func (c *child) kill() {
	c.mu.Lock()
	if c.killedAt == 0 {
		c.killedAt = time.Now().UnixNano()
	}
	c.mu.Unlock()
	c.signal(sigKill)
	<-c.done
}

func (c *child) signal(sig sigName) {
	if err := signalPid(c.cmd.Process.Pid, sig); err != nil {
		c.r.fatalf("agent %s: signal %s: %v", c.name, sig, err)
	}
}

// finish asks the agent to exit and waits for it (2s), killing it if it does not; after
// finish the history is complete.
func (c *child) finish() {
	c.send(command{Op: "exit"})
	select {
	case <-c.done:
	case <-time.After(2 * time.Second):
		c.kill()
	}
}

// stop is the cleanup: kill by pid if still running.
func (c *child) stop() {
	select {
	case <-c.done:
	default:
		_ = signalPid(c.cmd.Process.Pid, sigCont) // a stopped process dies of SIGKILL too, but be plain
		_ = signalPid(c.cmd.Process.Pid, sigKill)
		<-c.done
	}
	c.in.Close()
}

// exitedCleanly reports whether the agent exited with status 0.
func (c *child) exitedCleanly() bool {
	<-c.done
	return c.cmd.ProcessState != nil && c.cmd.ProcessState.Success()
}

// stderrTail returns the end of the agent's stderr, for messages.
func (c *child) stderrTail() string {
	data, _ := os.ReadFile(c.log)
	s := strings.TrimSpace(string(data))
	if s == "" {
		return ""
	}
	if len(s) > 2000 {
		s = s[len(s)-2000:]
	}
	return fmt.Sprintf("\n--- stderr of %s ---\n%s", c.name, s)
}

// expectEv awaits ev about id; if the command failed instead, it records a violation of
// check and reports false.
func (c *child) expectEv(ev, id, check string) (event, bool) {
	c.r.t.Helper()
	e := c.awaitEv(ev, id)
	if e.Ev == evFailed {
		c.r.violate(check, "%s: %s %s failed: %s", c.name, e.Op, id, e.Err)
		return e, false
	}
	return e, true
}
