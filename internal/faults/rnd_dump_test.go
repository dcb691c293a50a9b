package faults

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// rndDumpEnv, when set, is a directory where each run of the random scenario writes its
// merged log: what to read when a seed fails, and what TestRandomRecheck checks again.
const rndDumpEnv = "DLOCK_FAULTS_RANDOM_LOG"

// rndRecord is one line of a written log: the run (start, end), an agent's event, a
// fault, or a key left at the end.
type rndRecord struct {
	Run   *[2]int64    `json:"run,omitempty"`
	Event *event       `json:"event,omitempty"`
	Fault *faultRecord `json:"fault,omitempty"`
	Left  *leftRecord  `json:"left,omitempty"`
}

type faultRecord struct {
	Kind, Target, Scope string
	From, To            int64
	Bytes               int
}

type leftRecord struct {
	Node, Key string
	PTTL      time.Duration
}

// rndDump writes the run's log to $DLOCK_FAULTS_RANDOM_LOG/random-<seed>[-mutation].jsonl.
func rndDump(r *run, seed uint64, events []event, log rndLog) {
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
	_ = enc.Encode(rndRecord{Run: &[2]int64{log.start, log.end}})
	for i := range events {
		_ = enc.Encode(rndRecord{Event: &events[i]})
	}
	for _, ft := range log.faults {
		_ = enc.Encode(rndRecord{Fault: &faultRecord{ft.kind, ft.target, ft.scope, ft.from, ft.to, ft.bytes}})
	}
	for _, k := range log.left {
		_ = enc.Encode(rndRecord{Left: &leftRecord{k.node, k.key, k.pttl}})
	}
	r.step("log written to %s", f.Name())
}

// TestRandomRecheck runs the checker again on a written log: DLOCK_FAULTS_RANDOM_RECHECK=file.
// It needs no servers and takes a moment, for trying a change to the checker on a run.
func TestRandomRecheck(t *testing.T) {
	path := os.Getenv("DLOCK_FAULTS_RANDOM_RECHECK")
	if path == "" {
		t.Skip("set DLOCK_FAULTS_RANDOM_RECHECK to a log written with " + rndDumpEnv)
	}
	log, err := rndLoad(path)
	if err != nil {
		t.Fatal(err)
	}
	res := checkRandom(log, rndBounds{free: rndFreeBound, afterglow: rndAfterglow})
	for _, v := range res.violations {
		t.Errorf("%s: %s", v.check, v.msg)
	}
	t.Logf("%d holds, %d waits, %d faults; longest free time outside faults %.0f ms (%q)",
		len(log.holds), len(log.waits), len(log.faults), ms(res.longestFree.len()), res.freeName)
}

// rndLoad reads a log that rndDump wrote.
func rndLoad(path string) (rndLog, error) {
	f, err := os.Open(path)
	if err != nil {
		return rndLog{}, err
	}
	defer f.Close()
	var events []event
	var faults []rndFault
	var left []leftKey
	var run [2]int64
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var rec rndRecord
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return rndLog{}, err
		}
		switch {
		case rec.Run != nil:
			run = *rec.Run
		case rec.Event != nil:
			events = append(events, *rec.Event)
		case rec.Fault != nil:
			faults = append(faults, rndFault{rec.Fault.Kind, rec.Fault.Target, rec.Fault.Scope, rec.Fault.From, rec.Fault.To, rec.Fault.Bytes})
		case rec.Left != nil:
			left = append(left, leftKey{rec.Left.Node, rec.Left.Key, rec.Left.PTTL, keyLife(rec.Left.Key)})
		}
	}
	log := rndLogOf(events, faults, run[0], run[1])
	log.left, log.scopes = left, rndScopes()
	return log, sc.Err()
}
