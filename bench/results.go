package main

import (
	"encoding/json"
	"slices"
	"time"
)

// Scenario names, as used by --only and in the JSON.
const (
	scThroughput = "throughput"
	scAllocs     = "allocs"
	scHotKey     = "hotkey"
	scFair       = "fair"
	scFair1Proc  = "fair-1proc" // the fair scenario's goroutines, all in one process
	// The hot-key scenario's goroutines, all in one process: the Mutex beside fair-1proc.
	scHotKey1Proc = "hotkey-1proc"
	// The time from a PUBLISH to an idle subscriber process running: the machine's floor
	// under every hand-off between processes.
	scWakeup = "wakeup"
	scQuorum = "quorum" // on loopback
	// The quorum behind the delay proxy, 0.25 ms and 1 ms each way.
	scQuorumLat025 = "quorum-lat025"
	scQuorumLat1   = "quorum-lat1"
	scLeases       = "leases"
	scCommands     = "commands"
)

var scenarioOrder = []string{scCommands, scAllocs, scThroughput, scQuorum, scQuorumLat025, scQuorumLat1,
	scWakeup, scHotKey, scFair, scHotKey1Proc, scFair1Proc, scLeases}

// isHotKey tells the scenarios of one hot key, whose results carry samples.
func isHotKey(sc string) bool {
	return sc == scHotKey || sc == scFair || sc == scHotKey1Proc || sc == scFair1Proc
}

// isOneProc tells the hot-key scenarios whose goroutines all run in one process.
func isOneProc(sc string) bool { return sc == scHotKey1Proc || sc == scFair1Proc }

// scenarioLibs returns the libraries a scenario measures; the others are N/A there.
// Variants are left out: they run only when --libs names them (selectedLibs).
func scenarioLibs(sc string) []string {
	var out []string
	for _, l := range libraries {
		if measures(sc, l) {
			out = append(out, l.ID)
		}
	}
	return out
}

// measures tells whether scenario sc measures library (or variant) l.
func measures(sc string, l libInfo) bool {
	switch sc {
	case scHotKey, scHotKey1Proc:
		return l.ID != libDlockFair // the fair scenarios have it
	case scFair, scFair1Proc:
		return l.Fair
	case scQuorum, scQuorumLat025, scQuorumLat1:
		return l.Quorum
	case scLeases:
		return l.AutoRenew
	case scWakeup:
		return l.ID == libDlock // no library's: measured once per run, shown in dlock's column
	}
	return true
}

// result is one measurement: one scenario, one library, one run.
type result struct {
	Scenario string             `json:"scenario"`
	Lib      string             `json:"lib"`
	Run      int                `json:"run"`
	Metrics  map[string]float64 `json:"metrics"`
	Notes    map[string]string  `json:"notes,omitempty"`
	Err      string             `json:"error,omitempty"`
	// Hot key and fair scenarios: every sample of every worker.
	Samples []sample `json:"samples,omitempty"`
}

// sample is one Lock of the hot-key scenario, in wall-clock nanoseconds (the workers are
// processes on one machine: one clock). Acq is 0 for a wait that never ended.
type sample struct {
	G   int   `json:"g"` // goroutine, 0..15 across the workers
	Req int64 `json:"q"` // Lock called
	Acq int64 `json:"a"` // Lock returned the lock
	Rel int64 `json:"r"` // Unlock called
}

// report is everything the run produced: the JSON file.
type report struct {
	Started  time.Time         `json:"started"`
	Command  string            `json:"command"`
	Config   benchConfig       `json:"config"`
	Machine  machineInfo       `json:"machine"`
	Versions map[string]string `json:"versions"`
	Results  []*result         `json:"results"`
	Elapsed  string            `json:"elapsed"`
}

func (r *report) find(sc, lib string) []*result {
	var out []*result
	for _, x := range r.Results {
		if x.Scenario == sc && x.Lib == lib {
			out = append(out, x)
		}
	}
	return out
}

// median returns the median over runs of one metric, and whether any run had it.
func (r *report) median(sc, lib, metric string) (float64, bool) {
	var vs []float64
	for _, x := range r.find(sc, lib) {
		if v, ok := x.Metrics[metric]; ok && x.Err == "" {
			vs = append(vs, v)
		}
	}
	if len(vs) == 0 {
		return 0, false
	}
	return medianOf(vs), true
}

func medianOf(vs []float64) float64 {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n%2 == 1 {
		return s[n/2]
	}
	return (s[n/2-1] + s[n/2]) / 2
}

// quantile of sorted values (nearest rank).
func quantile(sorted []float64, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func writeJSON(path string, r *report) error {
	b, err := json.Marshal(r) // compact: the samples make it large
	if err != nil {
		return err
	}
	return writeFile(path, b)
}
