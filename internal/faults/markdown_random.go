package faults

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// rndOps are the operations of the random workload, in the order the table lists them;
// the other counts (failures by cause, acquisitions) follow.
var rndOps = []string{"lock", "trylock", "acquired", "extend-longer", "extend-shorter", "unlock", "abandon", "cancel", "close"}

// writeRandom writes a table of the randomized runs of each scenario that has them: one
// row per seed, so that a failing seed can be replayed.
func (r *Report) writeRandom(b *strings.Builder) {
	for _, s := range r.Scenarios {
		if len(s.Random) == 0 {
			continue
		}
		fmt.Fprintf(b, "### Randomized runs of `%s`\n\n", s.Name)
		b.WriteString("Each seed fixes every draw of the workload and of the injector (the timing of real processes still varies). " +
			"Replay one with `DLOCK_FAULTS_SEED=<seed> DLOCK_FAULTS_ONLY='^random$' make faults` " +
			"(several: `DLOCK_FAULTS_SEED=a,b,c`); run longer with `DLOCK_FAULTS_RANDOM_DURATION=5m` and more fresh seeds with " +
			"`DLOCK_FAULTS_RANDOM_SEEDS=20`; `DLOCK_FAULTS_RANDOM_LOG=dir` writes each run's merged log there.\n\n")
		b.WriteString("| seed | workload | operations | faults injected | longest free time outside faults (time outside faults) | violations | first violation |\n")
		b.WriteString("|---|---|---|---|---|---|---|\n")
		for _, run := range s.Random {
			fmt.Fprintf(b, "| %d | %.0f s | %s | %s | %.0f ms (`%s`)%s | %d | %s |\n", run.Seed, run.Seconds,
				cell(opsText(run.Operations)), cell(countsText(run.Faults)), run.LongestFree, run.FreeName, quietCell(run.Quiet), run.Violations, cell(run.First))
		}
		b.WriteString("\n")
	}
}

// opsText renders the operation counts: the total, then each, the workload's own first.
func opsText(ops map[string]int64) string {
	total := int64(0)
	for _, op := range rndOps {
		if op != "acquired" {
			total += ops[op]
		}
	}
	keys := slices.Sorted(maps.Keys(ops))
	slices.SortStableFunc(keys, func(a, b string) int { return opRank(a) - opRank(b) })
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, ops[k]))
	}
	return fmt.Sprintf("%d: %s", total, strings.Join(parts, ", "))
}

func opRank(op string) int {
	if i := slices.Index(rndOps, op); i >= 0 {
		return i
	}
	return len(rndOps)
}

// countsText renders counts by kind, with their total.
func countsText(m map[string]int) string {
	total := 0
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(m)) {
		total += m[k]
		parts = append(parts, fmt.Sprintf("%s %d", k, m[k]))
	}
	return fmt.Sprintf("%d: %s", total, strings.Join(parts, ", "))
}

// quietCell renders the time outside faults, per deployment.
func quietCell(q map[string]float64) string {
	if len(q) == 0 {
		return ""
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(q)) {
		parts = append(parts, fmt.Sprintf("%s %.0f s", k, q[k]))
	}
	return " (" + strings.Join(parts, ", ") + ")"
}
