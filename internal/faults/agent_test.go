package faults

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// agent is the body of a holder process: a dlock Client on the lock deployment, a plain
// client on the storage, and the leases it took, by the parent's ids.
type agent struct {
	cfg     agentConfig
	client  *dlock.Client
	nodes   []*redis.Client
	cluster *redis.ClusterClient // the lock deployment when it is a Cluster (nodes is then empty)
	store   *redis.Client

	outMu sync.Mutex
	out   *json.Encoder

	mu     sync.Mutex
	leases map[string]*held
	closed bool     // the Client was closed by a command
	rnd    rndState // the random workload's

	watchers sync.WaitGroup // one per lease: they report its end
}

// agentMain runs an agent until the parent says exit (status 0) or goes away (1).
func agentMain() int {
	var cfg agentConfig
	if err := json.Unmarshal([]byte(os.Getenv(agentEnv)), &cfg); err != nil {
		fmt.Fprintln(os.Stderr, "agent config:", err)
		return 2
	}
	redis.SetLogger(quietLogger{}) // every fault makes go-redis log failed dials
	a, err := newAgent(cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "agent:", err)
		return 2
	}
	a.emit(event{Ev: evReady})
	dec := json.NewDecoder(os.Stdin)
	for {
		var cmd command
		if err := dec.Decode(&cmd); err != nil {
			return 1 // the parent is gone
		}
		if cmd.Op == "exit" {
			a.shutdown()
			return 0
		}
		go a.do(cmd) // the process exits with the parent's exit: no need to wait for them
	}
}

type quietLogger struct{}

func (quietLogger) Printf(context.Context, string, ...any) {}

func newAgent(cfg agentConfig) (*agent, error) {
	a := &agent{cfg: cfg, out: json.NewEncoder(os.Stdout), leases: map[string]*held{}, rnd: newRndState()}
	for _, addr := range cfg.Nodes {
		opts := clientOptions(addr)
		a.nodes = append(a.nodes, redis.NewClient(opts))
	}
	if sc := cfg.Sentinel; sc != nil {
		a.nodes = append(a.nodes, redis.NewFailoverClient(&redis.FailoverOptions{
			MasterName: sc.Master, SentinelAddrs: sc.Addrs,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		}))
	}
	if len(cfg.Cluster) > 0 {
		a.cluster = redis.NewClusterClient(&redis.ClusterOptions{
			Addrs:       cfg.Cluster,
			DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second,
		})
	}
	a.store = redis.NewClient(clientOptions(cfg.Store))
	var err error
	a.client, err = a.newClient()
	return a, err
}

// newClient returns a dlock Client on the agent's nodes: New for one, NewQuorum for more.
func (a *agent) newClient() (*dlock.Client, error) {
	var opts []dlock.Option
	if ac := a.cfg.Acks; ac != nil && a.cfg.Mutation != mutNoAcks {
		opts = append(opts, dlock.WithReplicaAcks(ac.Replicas, ac.Timeout))
	}
	if a.cfg.Unsure {
		opts = append(opts, dlock.WithObserver(dlock.Observer{Attempted: a.unsure}))
	}
	switch {
	case a.cluster != nil:
		return dlock.New(a.cluster, opts...), nil
	case len(a.nodes) == 1:
		return dlock.New(a.nodes[0], opts...), nil
	}
	rdbs := make([]redis.UniversalClient, len(a.nodes))
	for i, n := range a.nodes {
		rdbs[i] = n
	}
	return dlock.NewQuorum(rdbs, opts...)
}

// clientOptions are redistest's: 1s timeouts, the rest go-redis' defaults.
func clientOptions(addr string) *redis.Options {
	return &redis.Options{Addr: addr, DialTimeout: time.Second, ReadTimeout: time.Second, WriteTimeout: time.Second}
}

// shutdown closes the Client (releasing what it holds) unless a command did, then the
// Redis clients.
func (a *agent) shutdown() {
	a.mu.Lock()
	closed, client := a.closed, a.client
	a.closed = true
	a.mu.Unlock()
	if !closed {
		a.closeMarked(client)
	}
	waitFor(&a.watchers, 2*time.Second) // Close ended every lease: let their ends be reported
	for _, n := range a.nodes {
		_ = n.Close()
	}
	if a.cluster != nil {
		_ = a.cluster.Close()
	}
	_ = a.store.Close()
}

// waitFor waits up to d for wg and reports whether it gave up.
func waitFor(wg *sync.WaitGroup, d time.Duration) (gaveUp bool) {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
		return false
	case <-time.After(d):
		return true
	}
}

// emit writes one event; At is stamped now unless set.
func (a *agent) emit(e event) {
	if e.At == 0 {
		e.At = time.Now().UnixNano()
	}
	a.outMu.Lock()
	defer a.outMu.Unlock()
	_ = a.out.Encode(e)
}

func (a *agent) fail(cmd command, err error) {
	a.emit(event{Ev: evFailed, ID: cmd.ID, Op: cmd.Op, Name: cmd.Name, Err: err.Error(), Kind: kindOf(err)})
}

// kindOf names the dlock error that err wraps, for the parent, which sees only text.
func kindOf(err error) string {
	for _, k := range []struct {
		err  error
		kind string
	}{
		{dlock.ErrNotHeld, "not-held"},
		{dlock.ErrNotAcquired, "not-acquired"},
		{dlock.ErrClosed, "closed"},
		{dlock.ErrNotReplicated, "not-replicated"},
		{context.DeadlineExceeded, "deadline"},
	} {
		if errors.Is(err, k.err) {
			return k.kind
		}
	}
	return ""
}

// agentOps are the commands; each runs on a goroutine of its own.
var agentOps = map[string]func(a *agent, cmd command){
	"lock":       (*agent).lock,
	"unlock":     (*agent).unlock,
	"extend":     (*agent).extend,
	"write":      (*agent).write,
	"work":       (*agent).work,
	"contend":    (*agent).contend,
	"extendrace": (*agent).extendRace,
	"grab":       (*agent).grab,
	"closeload":  (*agent).closeLoad,
	"fuzz":       (*agent).fuzz,
	"random":     (*agent).random,
	"guard":      (*agent).guard,
	"leader":     (*agent).leader,
}

func (a *agent) do(cmd command) {
	op, ok := agentOps[cmd.Op]
	if !ok {
		a.fail(cmd, fmt.Errorf("unknown op %q", cmd.Op))
		return
	}
	op(a, cmd)
}

// lockOptions turns a command into dlock's lock options.
func lockOptions(cmd command) []dlock.LockOption {
	var opts []dlock.LockOption
	if cmd.TTL != 0 || cmd.ZeroTTL {
		opts = append(opts, dlock.TTL(cmd.TTL))
	}
	if cmd.NoRenew {
		opts = append(opts, dlock.NoRenew())
	}
	return opts
}
