// Package faults is dlock's fault suite: scenarios that break real processes on purpose
// (redis-servers paused, killed, restarted, their replies delayed or swallowed, their
// clocks stepped; holder processes stopped, killed, cut off) and check, from what the
// processes saw, that the guarantees of docs/guarantees.md hold: one holder at a time until
// ValidUntil, loss reported on time, fencing tokens that only grow, stale holders that
// cannot release or extend someone else's lock, bad input refused without damage.
//
// Every scenario starts its own redis-servers (internal/redistest), proxies
// (internal/faultproxy) and holder processes: the test binary run again as an agent that
// takes commands on stdin and reports events on stdout, with wall-clock times (one
// machine, one clock). Everything is stopped by its pid when the run ends.
//
// One scenario, random, is randomized and seeded: processes on one server and on a quorum
// draw Lock, TryLock, Extend, Unlock, cancellations and Close over every kind of lock,
// while an injector holds their requests back and delivers them late (or twice) through
// internal/lateproxy, delays replies, cuts connections and pauses processes. A checker,
// a pure function of the merged logs of every process (rnd_check_test.go), then looks
// for two holders at once, tokens that do not grow, a lock left free while someone waits
// outside faults, and keys other than fencing counters left behind. Its seeds are printed
// and in the report; DLOCK_FAULTS_SEED=n[,m...] replays them,
// DLOCK_FAULTS_RANDOM_SEEDS=k draws k fresh ones (3 by default),
// DLOCK_FAULTS_RANDOM_DURATION=d sets each run's length (30s) and
// DLOCK_FAULTS_RANDOM_LOG=dir writes each run's merged log there.
//
// Each check can fail, and the suite shows it: every mutation breaks one property on
// purpose (a lock without NX, storage that ignores fencing tokens, a worker that ignores
// its lease's context, ...) and runs one scenario once; it must be caught.
//
// The suite is a test that runs only when asked: `make faults`, or
//
//	DLOCK_FAULTS=1 go test -count=1 -timeout 15m ./internal/faults
//
// with DLOCK_FAULTS_ONLY=regexp (scenarios and mutations by name),
// DLOCK_FAULTS_MUTATIONS=0 (no mutation runs) and DLOCK_FAULTS_JSON=file (the results,
// from which cmd/reliability writes RELIABILITY.md; relative to this package's directory,
// where go test runs). This package's non-test code is that report: its types and its
// Markdown.
package faults
