package faults

import (
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"
)

// The random scenario's settings come from the environment, so that a longer run, or the
// replay of a seed, is one variable away:
//
//	DLOCK_FAULTS_SEED=n[,m...]      replay these seeds, one run each
//	DLOCK_FAULTS_RANDOM_SEEDS=k     otherwise, k fresh seeds (default rndSeeds)
//	DLOCK_FAULTS_RANDOM_DURATION=d  each run's workload (default rndDuration)
//
// A mutation runs the first seed, for rndMutationDuration.
const (
	rndSeeds            = 3
	rndDuration         = 30 * time.Second
	rndMutationDuration = 12 * time.Second
)

type rndSettings struct {
	seeds []uint64
	dur   time.Duration
}

var rndCfg = rndSettingsFrom(os.Getenv)

// rndSettingsFrom reads the settings; what does not parse is left at its default (the
// scenario says which seeds and duration it ran, so a typo shows in the log).
func rndSettingsFrom(getenv func(string) string) rndSettings {
	cfg := rndSettings{dur: rndDuration}
	if d, err := time.ParseDuration(getenv("DLOCK_FAULTS_RANDOM_DURATION")); err == nil && d > 0 {
		cfg.dur = d
	}
	for _, f := range strings.Split(getenv("DLOCK_FAULTS_SEED"), ",") {
		if n, err := strconv.ParseUint(strings.TrimSpace(f), 10, 64); err == nil {
			cfg.seeds = append(cfg.seeds, n)
		}
	}
	if len(cfg.seeds) > 0 {
		return cfg
	}
	k, err := strconv.Atoi(getenv("DLOCK_FAULTS_RANDOM_SEEDS"))
	if err != nil || k < 1 {
		k = rndSeeds
	}
	for range k {
		cfg.seeds = append(cfg.seeds, rand.Uint64N(1e9)) // short enough to type back
	}
	return cfg
}

// seedFor returns the seed and the workload's length for run r.
func (cfg rndSettings) seedFor(r *run) (uint64, time.Duration) {
	if r.mutation != "" {
		return cfg.seeds[0], min(cfg.dur, rndMutationDuration)
	}
	return cfg.seeds[r.index%len(cfg.seeds)], cfg.dur
}

// limit bounds one run: the workload, and what comes after it (the faults' end, the
// agents' exit, the wait for every key's lifetime), with room on a loaded machine.
func (cfg rndSettings) limit() time.Duration { return cfg.dur + 90*time.Second }
