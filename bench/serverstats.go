package main

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"
)

// commandStats returns the calls of every command from INFO commandstats: commands
// that scripts ran count there too.
func (b *bench) commandStats(addr string) (cmdCounts, error) {
	return b.commandStat(addr, "calls")
}

// scriptMicros returns the microseconds redis-server has spent in EVAL and EVALSHA (the
// scripts with the commands they ran) from INFO commandstats.
func (b *bench) scriptMicros(addr string) (int64, error) {
	usec, err := b.commandStat(addr, "usec")
	return usec["evalsha"] + usec["eval"], err
}

// cost is what INFO commandstats says of one command: calls and µs in all.
type cost struct{ calls, usec int64 }

// commandCost returns the calls and µs of one command (lower-case name) so far.
func (b *bench) commandCost(addr, name string) (cost, error) {
	stats, err := b.commandFields(addr, "calls", "usec")
	return cost{calls: stats["calls"][name], usec: stats["usec"][name]}, err
}

// commandStat returns one field (calls, usec, ...) of every command in INFO commandstats,
// by lower-case command name.
func (b *bench) commandStat(addr, field string) (cmdCounts, error) {
	stats, err := b.commandFields(addr, field)
	return stats[field], err
}

// commandFields returns fields of every command from one INFO commandstats (so that they
// are of the same instant), by field, then by lower-case command name.
func (b *bench) commandFields(addr string, fields ...string) (map[string]cmdCounts, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := b.admin(addr).Info(ctx, "commandstats").Result()
	if err != nil {
		return nil, fmt.Errorf("INFO commandstats on %s: %w", addr, err)
	}
	out := map[string]cmdCounts{}
	for _, f := range fields {
		out[f] = cmdCounts{}
	}
	for line := range strings.SplitSeq(info, "\n") {
		name, rest, ok := strings.Cut(strings.TrimSpace(line), ":")
		name, found := strings.CutPrefix(name, "cmdstat_")
		if !ok || !found {
			continue
		}
		for kv := range strings.SplitSeq(rest, ",") {
			field, v, _ := strings.Cut(kv, "=")
			if counts, wanted := out[field]; wanted {
				n, err := strconv.ParseInt(v, 10, 64)
				if err != nil {
					return nil, fmt.Errorf("INFO commandstats: %q: %w", line, err)
				}
				counts[strings.ToLower(name)] = n
			}
		}
	}
	return out, nil
}

// mark sends ECHO text and waits until the monitor has seen it: everything executed
// before is then in the monitor's log.
func (b *bench) mark(m *monitor, text string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := b.admin(m.addr).Echo(ctx, text).Err(); err != nil {
		return err
	}
	return m.waitFor(text, 5*time.Second)
}

// monitor reads a MONITOR stream. Each line names the client, or "lua" for commands a
// script ran.
type monitor struct {
	addr  string
	conn  net.Conn
	mu    sync.Mutex
	cond  *sync.Cond
	lines []string
	err   error
	done  chan struct{}
}

func startMonitor(addr string) (*monitor, error) {
	conn, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return nil, err
	}
	r := bufio.NewReaderSize(conn, 1<<16)
	_ = conn.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := conn.Write([]byte("MONITOR\r\n")); err != nil {
		conn.Close()
		return nil, err
	}
	if line, err := r.ReadString('\n'); err != nil || strings.TrimSpace(line) != "+OK" {
		conn.Close()
		return nil, fmt.Errorf("MONITOR on %s: %q %v", addr, line, err)
	}
	_ = conn.SetDeadline(time.Time{})
	m := &monitor{addr: addr, conn: conn, done: make(chan struct{})}
	m.cond = sync.NewCond(&m.mu)
	go func() {
		defer close(m.done)
		for {
			line, err := r.ReadString('\n')
			m.mu.Lock()
			if err != nil {
				m.err = err
				m.cond.Broadcast()
				m.mu.Unlock()
				return
			}
			m.lines = append(m.lines, strings.TrimRight(line, "\r\n"))
			m.cond.Broadcast()
			m.mu.Unlock()
		}
	}()
	return m, nil
}

func (m *monitor) waitFor(text string, timeout time.Duration) error {
	t := time.AfterFunc(timeout, func() {
		m.mu.Lock()
		if m.err == nil {
			m.err = fmt.Errorf("MONITOR: %q not seen within %v", text, timeout)
		}
		m.cond.Broadcast()
		m.mu.Unlock()
	})
	defer t.Stop()
	m.mu.Lock()
	defer m.mu.Unlock()
	for i := 0; ; {
		for ; i < len(m.lines); i++ {
			if strings.Contains(m.lines[i], text) {
				return nil
			}
		}
		if m.err != nil {
			return m.err
		}
		m.cond.Wait()
	}
}

// between counts the commands logged between the lines that contain the two markers,
// split into those that clients sent and those that scripts ran.
func (m *monitor) between(begin, end string) (client, script cmdCounts) {
	m.mu.Lock()
	defer m.mu.Unlock()
	client, script = cmdCounts{}, cmdCounts{}
	in := false
	for _, line := range m.lines {
		switch {
		case strings.Contains(line, begin):
			in = true
			continue
		case strings.Contains(line, end):
			return client, script
		}
		if !in {
			continue
		}
		// +1700000000.123456 [0 127.0.0.1:5432] "evalsha" "..." / [0 lua] "SET" ...
		open, close := strings.IndexByte(line, '['), strings.IndexByte(line, ']')
		if open < 0 || close < open {
			continue
		}
		who := line[open+1 : close]
		rest := strings.TrimSpace(line[close+1:])
		name, _, _ := strings.Cut(strings.TrimPrefix(rest, `"`), `"`)
		name = strings.ToLower(name)
		if ignored[name] {
			continue
		}
		if strings.HasSuffix(who, " lua") {
			script[name]++
		} else {
			client[name]++
		}
	}
	return client, script
}

func (m *monitor) stop() {
	m.conn.Close()
	<-m.done
}
