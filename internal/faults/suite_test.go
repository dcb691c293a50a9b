package faults

import (
	"os"
	"os/exec"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestFaults runs every scenario, then every mutation, and writes the results to
// $DLOCK_FAULTS_JSON. It runs only with DLOCK_FAULTS=1 (make faults): it takes minutes.
// Scenarios that find violations fail it; so do mutations that are not caught.
func TestFaults(t *testing.T) {
	if os.Getenv("DLOCK_FAULTS") != "1" {
		t.Skip("the fault suite runs with DLOCK_FAULTS=1 (make faults)")
	}
	only := regexp.MustCompile(os.Getenv("DLOCK_FAULTS_ONLY")) // "" matches everything
	rep := &Report{Started: time.Now(), Machine: machine()}
	for _, c := range checkMeanings {
		rep.Checks = append(rep.Checks, Check{Name: c.name, Means: c.means})
	}
	rep.Limitations = limitations
	for _, sc := range scenarios {
		if only.MatchString(sc.name) {
			rep.Scenarios = append(rep.Scenarios, runRow(t, sc))
		}
	}
	if os.Getenv("DLOCK_FAULTS_MUTATIONS") != "0" {
		for _, m := range mutations {
			if only.MatchString(m.name) || only.MatchString(m.scenario) {
				rep.Mutations = append(rep.Mutations, runMutation(t, m))
			}
		}
		if len(rep.Mutations) == len(mutations) {
			everyCheckFailed(t, rep)
		}
	}
	rep.Seconds = time.Since(rep.Started).Seconds()
	if path := os.Getenv("DLOCK_FAULTS_JSON"); path != "" {
		if err := rep.Save(path); err != nil {
			t.Errorf("write results: %v", err)
		}
	}
}

// runRow runs a scenario its number of times and makes its row of the report.
func runRow(t *testing.T, sc scenario) Scenario {
	start := time.Now()
	var o outcome
	t.Run(sc.name, func(t *testing.T) { o = runScenario(t, sc, sc.runs, "") })
	row := Scenario{
		Name: sc.name, Fault: sc.fault, Asserts: sc.asserts, Checks: sc.checks,
		Runs: o.runs, Violations: len(o.violations), Figure: sc.figureText(o.values),
		Notes: dedupe(o.notes), Error: o.fatal, Seconds: time.Since(start).Seconds(),
		Random: o.randoms,
	}
	for i, v := range o.violations {
		if i == 5 {
			break
		}
		row.Samples = append(row.Samples, v.check+": "+v.msg)
	}
	if row.Verdict() != "pass" {
		t.Errorf("scenario %s: %s: %d violations in %d runs %v %s", sc.name, row.Verdict(), row.Violations, row.Runs, row.Samples, row.Error)
	}
	return row
}

// runMutation runs the mutation's scenario once and records what caught it.
func runMutation(t *testing.T, m mutationCase) Mutation {
	sc, ok := scenarioNamed(m.scenario)
	if !ok {
		t.Fatalf("mutation %s: no scenario %q", m.name, m.scenario)
	}
	var o outcome
	t.Run("mutation:"+m.name+"@"+m.scenario, func(t *testing.T) { o = runScenario(t, sc, 1, m.name) })
	row := Mutation{Name: m.name, Scenario: m.scenario, Breaks: m.breaks, Error: o.fatal}
	row.CaughtBy = checksOf(o.violations)
	row.Caught = len(row.CaughtBy) > 0
	if row.Caught {
		row.Sample = o.violations[0].check + ": " + o.violations[0].msg
	}
	if !row.Caught {
		t.Errorf("mutation %s of %s was not caught %s", m.name, m.scenario, o.fatal)
	}
	return row
}

// everyCheckFailed fails the test for each check that no mutation made fail.
func everyCheckFailed(t *testing.T, rep *Report) {
	for _, c := range rep.Checks {
		shown := false
		for _, m := range rep.Mutations {
			shown = shown || slices.Contains(m.CaughtBy, c.Name)
		}
		if !shown {
			t.Errorf("no mutation made the check %s fail", c.Name)
		}
	}
}

func scenarioNamed(name string) (scenario, bool) {
	for _, sc := range scenarios {
		if sc.name == name {
			return sc, true
		}
	}
	return scenario{}, false
}

func dedupe(ss []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, s := range ss {
		if !seen[s] {
			seen[s] = true
			out = append(out, s)
		}
	}
	return out
}

func machine() Machine {
	m := Machine{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), Go: runtime.Version(), Redis: "unknown"}
	bin := os.Getenv("REDIS_SERVER")
	if bin == "" {
		bin = "redis-server"
	}
	if out, err := exec.Command(bin, "--version").Output(); err == nil {
		for _, f := range strings.Fields(string(out)) {
			if v, ok := strings.CutPrefix(f, "v="); ok {
				m.Redis = v
			}
		}
	}
	return m
}
