package faults

import "time"

// The agent protocol: the parent writes one JSON command per line to an agent's stdin;
// the agent writes one JSON event per line to its stdout. Every command runs on a
// goroutine of its own, so that the parent can act on a lease while a long command (a
// wait, a work loop) runs. Times in events are wall-clock nanoseconds: all processes
// run on one machine and read one clock.

// agentConfig is what an agent is started with (JSON in agentEnv).
type agentConfig struct {
	Name     string   `json:"name"`               // for messages
	Nodes    []string `json:"nodes"`              // the lock deployment: one address is New, more are NewQuorum
	Store    string   `json:"store"`              // the fenced storage and the counters
	Mutation string   `json:"mutation,omitempty"` // the property this agent breaks on purpose
	// Sentinel, if set, is the lock deployment instead of Nodes: a go-redis failover
	// client that finds the master through these Sentinels.
	Sentinel *sentinelConfig `json:"sentinel,omitempty"`
	// Cluster, if set, is the lock deployment instead of Nodes: a go-redis cluster client
	// with these seeds and go-redis' default ClusterStateReloadInterval (a minute), so
	// that dlock has to find a promoted replica by itself.
	Cluster []string `json:"cluster,omitempty"`
	// Acks, if set, is the agent's WithReplicaAcks (left out under the no-acks mutation).
	Acks *acksConfig `json:"acks,omitempty"`
	// Unsure, if set, makes the agent report every attempt whose fate it does not know
	// (evUnsure).
	Unsure bool `json:"unsure,omitempty"`
}

// acksConfig is the arguments of WithReplicaAcks.
type acksConfig struct {
	Replicas int           `json:"replicas"`
	Timeout  time.Duration `json:"timeout"`
}

// sentinelConfig names a Sentinel-managed master.
type sentinelConfig struct {
	Master string   `json:"master"`
	Addrs  []string `json:"addrs"`
}

// command is one instruction to an agent. Which fields matter depends on Op.
type command struct {
	Op      string        `json:"op"`
	ID      string        `json:"id,omitempty"`   // the lease it takes or acts on
	Kind    string        `json:"kind,omitempty"` // lock: mutex (default), fair, read, write, sem, elect
	Name    string        `json:"name,omitempty"`
	Names   []string      `json:"names,omitempty"`
	TTL     time.Duration `json:"ttl,omitempty"`
	ZeroTTL bool          `json:"zerottl,omitempty"` // pass TTL(0) rather than no TTL option
	NoRenew bool          `json:"norenew,omitempty"`
	Try     bool          `json:"try,omitempty"`  // TryLock rather than Lock
	Wait    time.Duration `json:"wait,omitempty"` // bound of a Lock, or the duration of a loop
	Every   time.Duration `json:"every,omitempty"`
	Size    int64         `json:"size,omitempty"` // Semaphore size
	N       int64         `json:"n,omitempty"`    // permits; goroutines; calls
	Short   time.Duration `json:"short,omitempty"`
	Seed    int64         `json:"seed,omitempty"`
	Specs   []rndSpec     `json:"specs,omitempty"` // random: the locks to draw from
}

// event is one report from an agent. Which fields are set depends on Ev.
type event struct {
	Ev    string `json:"ev"`
	ID    string `json:"id,omitempty"`
	Op    string `json:"op,omitempty"`
	Name  string `json:"name,omitempty"`
	Proc  string `json:"proc,omitempty"`  // set by the parent: which agent said it
	Token uint64 `json:"token,omitempty"` // fencing token
	Last  uint64 `json:"last,omitempty"`  // contention: the largest token stored before this hold
	At    int64  `json:"at,omitempty"`    // when it happened
	Valid int64  `json:"valid,omitempty"` // the lease's ValidUntil at that moment
	End   int64  `json:"end,omitempty"`   // contention: when the hold ended
	OK    bool   `json:"ok,omitempty"`
	Err   string `json:"err,omitempty"`
	Kind  string `json:"kind,omitempty"` // evFailed: which dlock error it wraps (kindOf)
	N     int64  `json:"n,omitempty"`
	M     int64  `json:"m,omitempty"`
	Dur   int64  `json:"dur,omitempty"` // nanoseconds
	// The random workload's: the lock's kind and names, each name's token (a MultiMutex
	// has several), when the acquisition was called, a Semaphore's size, and in its
	// final evDone the operations made, by kind.
	Lock   string            `json:"lock,omitempty"`
	Names  []string          `json:"names,omitempty"`
	Tokens map[string]uint64 `json:"tokens,omitempty"`
	Since  int64             `json:"since,omitempty"`
	Size   int64             `json:"size,omitempty"`
	Counts map[string]int64  `json:"counts,omitempty"`
}

// Events an agent sends.
const (
	evReady    = "ready"    // started: the clients are built
	evAcquired = "acquired" // ID, Name, Token, At, Valid
	evEnded    = "ended"    // ID, At (Unlock called, or loss seen), Valid (the last ValidUntil), Err: released or lost
	evFailed   = "failed"   // ID, Op, Err: the command failed
	evDone     = "done"     // ID, Op: the command finished (with its figures in N, M, Dur, OK, Err)
	evUnsure   = "unsure"   // random: Names, At, End: an attempt of unknown fate (no verdict, or too late), which may hold them until End
	evWrote    = "wrote"    // ID, Token, At, OK (accepted by the fenced storage)
	evHold     = "hold"     // contention: Name, Token, Last, At (acquired), End (released), N (counter read)
	evDiverged = "diverged" // extend race: Name, Valid, At, N (the ms Redis keeps the key)
	evBad      = "bad"      // bad input: Op (the call), Name (the case), OK (acceptable outcome), Err
	evWaiting  = "waiting"  // random: ID, Names, At: a blocking acquisition was called
)

// Results of a lease.
const (
	endReleased = "released"
	endLost     = "lost"
)
