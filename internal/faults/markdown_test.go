package faults

import (
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestMarkdown(t *testing.T) {
	r := &Report{
		Started: time.Date(2026, 1, 2, 3, 4, 0, 0, time.UTC),
		Machine: Machine{OS: "linux", Arch: "amd64", CPUs: 2, Go: "go1.26", Redis: "7.0.15"},
		Scenarios: []Scenario{
			{Name: "ok", Fault: "a | b", Asserts: "holds", Runs: 2, Figure: "1 ms"},
			{Name: "bad", Runs: 1, Violations: 1, Samples: []string{"exclusive: two holders"},
				Random: []RandomRun{{Seed: 42, Seconds: 30, Operations: map[string]int64{"unlock": 2, "lock": 3, "failed:deadline": 1},
					Faults: map[string]int{"pause": 1, "hold": 2}, LongestFree: 12, FreeName: "m1", Violations: 1, First: "exclusive: two holders"}}},
		},
		Checks: []Check{{Name: "exclusive", Means: "one holder"}, {Name: "tokens", Means: "grow"}},
		Mutations: []Mutation{
			{Name: "nonx", Scenario: "ok", Caught: true, CaughtBy: []string{"exclusive"}},
			{Name: "nonx", Scenario: "bad", Caught: true, CaughtBy: []string{"exclusive"}},
		},
		Limitations: []Limitation{{Title: "Fencing", Risk: "r.", Do: "d.", Scenarios: []string{"ok"}}},
	}
	path := filepath.Join(t.TempDir(), "r.json")
	if err := r.Save(path); err != nil {
		t.Fatal(err)
	}
	loaded, err := Load(path)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := loaded.Markdown(&b); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	for _, want := range []string{
		"1 of 2 scenarios pass.",
		"| `ok` | a \\| b | holds | 2 | 0 | 1 ms | pass |",
		"| `bad` |  |  | 1 | 1 |  | **FAIL** |",
		"  - exclusive: two holders",
		"| `exclusive` | one holder | `nonx` | yes |",
		"| `tokens` | grow | (none in this run) | **not shown** |",
		"- **Fencing.** r. **Do:** d. (Shown by `ok`.)",
		"### Randomized runs of `bad`",
		"| 42 | 30 s | 5: lock 3, unlock 2, failed:deadline 1 | 3: hold 2, pause 1 | 12 ms (`m1`) | 1 | exclusive: two holders |",
	} {
		if !strings.Contains(md, want) {
			t.Errorf("Markdown lacks %q:\n%s", want, md)
		}
	}
}
