package faults

// Mutations: each breaks one property on purpose, for one run of one scenario, to show
// that the checks notice. The agents and the scenarios look at r.mutation (the agents
// get it in their configuration) and break what the name says.
const (
	mutNoNX       = "nonx"        // agents lock with a plain SET, without NX (control_test.go)
	mutNoFence    = "nofence"     // the storage accepts every token
	mutIgnoreCtx  = "ignore-ctx"  // the worker writes on without looking at its lease
	mutNoAOF      = "no-aof"      // servers run without persistence and come back empty at once
	mutPoll       = "poll"        // waiters poll with TryLock every two TTLs instead of waiting
	mutNaive      = "naive"       // Unlock is a plain DEL, Extend a plain PEXPIRE
	mutNoReload   = "no-reload"   // after warm-up, the server refuses EVAL and SCRIPT LOAD
	mutNoClose    = "no-close"    // the agent never calls Client.Close
	mutAcceptBad  = "accept-bad"  // the agent replaces bad input with good before calling dlock
	mutClobber    = "clobber"     // on a wrong-type error the agent deletes the key and retries
	mutBlackhole3 = "blackhole-3" // three nodes of five are blackholed, not two
	mutShorten    = "shorten"     // the parent shortens the lock keys behind the holder's back
	mutNoAcks     = "no-acks"     // the agents leave out WithReplicaAcks
	mutRestartAll = "restart-all" // every node of the quorum restarted empty at once
	mutOverhold   = "overhold"    // the agents report each lease held a TTL past its end
	mutTokenBack  = "token-back"  // the agents report every fencing token as 1
	mutLeak       = "leak"        // an agent leaves a key without expiry on a lock server
	mutGuardPlain = "guard-plain" // the agents write with a plain RPUSH instead of Lease.Guard
)

// mutationCase runs one scenario once with one mutation.
type mutationCase struct {
	name     string
	scenario string
	breaks   string
}

var mutations = []mutationCase{
	{mutNoNX, "pause-one", "mutual exclusion: the lock is a plain SET without NX, on one node"},
	{mutNoNX, "cutoff", "loss reporting: the broken lock never learns it lost its key, and its worker writes on"},
	{mutNoNX, "contention-quorum", "mutual exclusion under contention: SET without NX on the first node"},
	{mutNoFence, "pause-one", "fencing: the storage accepts every token"},
	{mutIgnoreCtx, "delayed-replies", "the worker's discipline: it writes on without looking at its lease"},
	{mutNoAOF, "tokens-restarts", "durable fencing counters: the server runs without AOF"},
	{mutNoAOF, "restart-aof", "persistence: the node runs without AOF and comes back empty at once"},
	{mutRestartAll, "tokens-rolling", "one node down at a time: every node is restarted empty at once half-way"},
	{mutPoll, "volatile-keys", "waiting: the waiter polls with TryLock every two TTLs"},
	{mutPoll, "script-flush", "waiting under contention: each goroutine tries the lock once every two TTLs, got or not"},
	{mutNaive, "stale-release", "ownership: Unlock is a plain DEL, Extend a plain PEXPIRE"},
	{mutNoReload, "script-flush", "script reloading: the server refuses EVAL and SCRIPT LOAD after warm-up"},
	{mutNoClose, "close-load", "Close: the agent never calls it"},
	{mutAcceptBad, "bad-input", "argument checks: bad input is replaced with good before dlock sees it"},
	{mutClobber, "bad-input", "leaving foreign keys alone: a wrong-type key is deleted and the call retried"},
	{mutBlackhole3, "blackhole-2", "the majority: three of five nodes are blackholed"},
	{mutShorten, "extend-race", "agreement with Redis: the lock keys are shortened behind the holder's back"},
	{mutNoAcks, "failover-window", "replica acknowledgements: the agents leave out WithReplicaAcks"},
	{mutOverhold, "random", "exclusion as the holders saw it: each agent reports its leases held a TTL past their end"},
	{mutTokenBack, "random", "growing tokens: each agent reports every fencing token as 1"},
	{mutPoll, "random", "waiting: acquisitions poll with one attempt every four TTLs instead of waiting"},
	{mutLeak, "random", "clean storage: an agent leaves a queue key without expiry behind"},
	{mutGuardPlain, "guard-stale", "guarded writes: the holders write with a plain RPUSH instead of Lease.Guard"},
}
