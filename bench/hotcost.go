package main

import (
	"time"
)

// serverSnapshot is what the standalone redis-server has spent so far: CPU (from /proc,
// schedstat, in ns) and, per command, calls and µs (INFO commandstats, scripts' commands
// included).
type serverSnapshot struct {
	cpu         time.Duration
	cpuOK       bool
	calls, usec cmdCounts
	statsErr    error
}

func (b *bench) serverSnapshot() serverSnapshot {
	var s serverSnapshot
	s.cpu, s.cpuOK = processCPU(b.single.PID())
	stats, err := b.commandFields(b.single.Addr, "calls", "usec")
	s.calls, s.usec, s.statsErr = stats["calls"], stats["usec"], err
	return s
}

// perGrant records what a hot-key run cost per grant: the server's CPU and the commands it
// ran (between before and after: the run, from the start line to the workers' exit), and
// the workers' CPU over their loops. Every grant counts, warm-up window included, as
// the CPU does.
func perGrant(res *result, before, after serverSnapshot, client time.Duration, samples []sample) {
	grants := 0
	for _, s := range samples {
		if s.Acq != 0 {
			grants++
		}
	}
	if grants == 0 {
		return
	}
	n := float64(grants)
	m := res.Metrics
	m["grants"] = n
	if before.cpuOK && after.cpuOK {
		m["server_cpu_us_per_grant"] = float64((after.cpu - before.cpu).Microseconds()) / n
	}
	if client > 0 {
		m["client_cpu_us_per_grant"] = float64(client.Microseconds()) / n
	}
	if before.statsErr == nil && after.statsErr == nil {
		calls := statsDelta(before.calls, after.calls)
		m["server_cmds_per_grant"] = float64(calls.total()) / n
		// EVALSHA's µs include the commands its scripts ran, which INFO also counts
		// apart: the scripts' time alone, not a sum over every command.
		usec := statsDelta(before.usec, after.usec)
		m["script_us_per_grant"] = float64(usec["evalsha"]+usec["eval"]) / n
		res.Notes["server_commands"] = calls.perOp(n)
	}
}
