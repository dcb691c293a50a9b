package faults

import (
	"encoding/json"
	"os"
	"time"
)

// Report is one run of the suite: what RELIABILITY.md is generated from.
type Report struct {
	Started     time.Time    `json:"started"`
	Seconds     float64      `json:"seconds"` // the whole run
	Machine     Machine      `json:"machine"`
	Scenarios   []Scenario   `json:"scenarios"`
	Checks      []Check      `json:"checks"`
	Mutations   []Mutation   `json:"mutations"`
	Limitations []Limitation `json:"limitations"`
}

// Machine says where the run happened.
type Machine struct {
	OS    string `json:"os"`
	Arch  string `json:"arch"`
	CPUs  int    `json:"cpus"`
	Go    string `json:"go"`
	Redis string `json:"redis"`
}

// Scenario is one row of the scenario table.
type Scenario struct {
	Name       string      `json:"name"`
	Fault      string      `json:"fault"`   // what is done to the processes
	Asserts    string      `json:"asserts"` // what must hold
	Checks     []string    `json:"checks"`
	Runs       int         `json:"runs"` // runs completed
	Violations int         `json:"violations"`
	Samples    []string    `json:"samples,omitempty"` // the first violations, verbatim
	Figure     string      `json:"figure"`            // the headline measurement, worst run
	Notes      []string    `json:"notes,omitempty"`
	Seconds    float64     `json:"seconds"`
	Error      string      `json:"error,omitempty"`  // the harness failed: no verdict
	Random     []RandomRun `json:"random,omitempty"` // the random scenario: one per seed
}

// RandomRun is one run of the randomized scenario: its seed, what it did and what it
// found. A run is replayed with DLOCK_FAULTS_SEED=Seed.
type RandomRun struct {
	Seed        uint64             `json:"seed"`
	Seconds     float64            `json:"seconds"`         // the workload's length
	Operations  map[string]int64   `json:"operations"`      // by kind, summed over the processes
	Faults      map[string]int     `json:"faults"`          // injected, by kind
	LongestFree float64            `json:"longest_free_ms"` // outside fault windows, while someone waited
	FreeName    string             `json:"free_name,omitempty"`
	Quiet       map[string]float64 `json:"quiet_s,omitempty"` // per deployment: seconds outside fault windows, when free time counts
	Violations  int                `json:"violations"`
	First       string             `json:"first,omitempty"` // the first violation, check: message
}

// Verdict is "pass", "FAIL" (violations found) or "error" (no verdict).
func (s Scenario) Verdict() string {
	switch {
	case s.Error != "":
		return "error"
	case s.Violations > 0:
		return "FAIL"
	}
	return "pass"
}

// Check is one property the scenarios assert.
type Check struct {
	Name  string `json:"name"`
	Means string `json:"means"`
}

// Mutation is one property broken on purpose, and whether the suite noticed.
type Mutation struct {
	Name     string   `json:"name"`
	Scenario string   `json:"scenario"`
	Breaks   string   `json:"breaks"`
	Caught   bool     `json:"caught"`
	CaughtBy []string `json:"caught_by,omitempty"` // the checks that reported violations
	Sample   string   `json:"sample,omitempty"`    // the first violation
	Error    string   `json:"error,omitempty"`
}

// Limitation is what dlock cannot do alone, and what the user must do about it.
type Limitation struct {
	Title     string   `json:"title"`
	Risk      string   `json:"risk"`
	Do        string   `json:"do"`
	Scenarios []string `json:"scenarios"` // where the suite shows it
}

// Load reads a report written by Save.
func Load(path string) (*Report, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var r Report
	return &r, json.Unmarshal(data, &r)
}

// Save writes r as indented JSON.
func (r *Report) Save(path string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(data, '\n'), 0o644)
}
