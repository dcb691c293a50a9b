package redistest

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"
)

// process is one run of redis-server.
type process struct {
	cmd     *exec.Cmd
	done    chan struct{} // closed once cmd.Wait returned
	pidFile string
}

// kill sends SIGKILL (works on stopped processes too), waits for the exit
// and removes the pid file.
func (p *process) kill() {
	_ = p.cmd.Process.Kill()
	<-p.done
	if p.pidFile != "" {
		os.Remove(p.pidFile)
	}
}

// spawn runs redis-server on s.Port and waits until it answers PING; on
// failure the process is gone again. The caller holds s.mu.
func (s *Server) spawn() error {
	out, err := os.OpenFile(filepath.Join(s.dir, "stdout.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o644)
	if err != nil {
		return fmt.Errorf("redistest: %w", err)
	}
	cmd := exec.Command(s.bin, s.argv()...)
	cmd.Dir = s.dir
	cmd.Stdout = out // an *os.File: no copying goroutine
	cmd.Stderr = out
	cmd.SysProcAttr = sysProcAttr()
	err = cmd.Start()
	out.Close()
	if err != nil {
		return fmt.Errorf("redistest: start %s: %w", s.bin, err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	go func() {
		_ = cmd.Wait()
		close(p.done)
	}()
	// The pid file is a second line of defence (after Pdeathsig) against
	// servers outliving a crashed test; failing to write it is not fatal.
	p.pidFile, _ = writePidFile(cmd.Process.Pid, s.dir)
	if err := s.waitReady(p); err != nil {
		p.kill()
		return err
	}
	s.proc = p
	return nil
}

// waitReady polls until this very process (checked by INFO process_id, as
// another test process may have grabbed the port) answers PING.
func (s *Server) waitReady(p *process) error {
	pid := p.cmd.Process.Pid
	deadline := time.Now().Add(readyTimeout)
	sleep := time.Millisecond
	for {
		select {
		case <-p.done:
			return fmt.Errorf("redistest: %s: %w (%v); args %q%s",
				s.Addr, errExitedEarly, p.cmd.ProcessState, s.argv(), s.logTail())
		default:
		}
		err := s.probe(pid)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("redistest: redis-server (pid %d) on %s did not answer PING within %v: %v; args %q%s",
				pid, s.Addr, readyTimeout, err, s.argv(), s.logTail())
		}
		time.Sleep(sleep)
		sleep = min(2*sleep, 50*time.Millisecond)
	}
}

func (s *Server) probe(pid int) error {
	c, err := dialRESP(s.Addr, 500*time.Millisecond, s.tls.probeConfig())
	if err != nil {
		return err
	}
	defer c.Close()
	if s.password != "" {
		if _, err := c.do("AUTH", s.password); err != nil {
			return err
		}
	}
	if pong, err := c.do("PING"); err != nil {
		return err
	} else if pong != "PONG" {
		return fmt.Errorf("PING answered %q", pong)
	}
	info, err := c.do("INFO", "server")
	if err != nil {
		return err
	}
	if got := infoField(info, "process_id"); got != strconv.Itoa(pid) {
		return fmt.Errorf("port answered by another redis-server (process_id %s)", got)
	}
	return nil
}
