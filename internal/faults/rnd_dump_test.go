package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
)

// rndDumpDir, when set, is a directory where each run of the random scenario writes its
// merged log (every agent's events, then the injector's faults, one JSON object a line):
// what to read when a seed fails.
const rndDumpEnv = "DLOCK_FAULTS_RANDOM_LOG"

// rndDump writes the run's log to $DLOCK_FAULTS_RANDOM_LOG/random-<seed>[-mutation].jsonl.
func rndDump(r *run, seed uint64, events []event, faults []rndFault) {
	dir := os.Getenv(rndDumpEnv)
	if dir == "" {
		return
	}
	name := fmt.Sprintf("random-%d", seed)
	if r.mutation != "" {
		name += "-" + r.mutation
	}
	f, err := os.Create(filepath.Join(dir, name+".jsonl"))
	if err != nil {
		r.note("log not written: %v", err)
		return
	}
	defer f.Close()
	enc := json.NewEncoder(f)
	for _, e := range events {
		_ = enc.Encode(e)
	}
	for _, ft := range faults {
		_ = enc.Encode(map[string]any{"ev": "fault", "kind": ft.kind, "target": ft.target, "scope": ft.scope, "from": ft.from, "to": ft.to})
	}
	r.step("log written to %s", f.Name())
}
