package dlock_test

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/anishathalye/porcupine"
	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// The contention tests run real OS processes: the test binary re-runs itself as a worker
// (TestMain dispatches on workerEnv). Each worker runs goroutines that take the same lock
// and, inside each hold, do a non-atomic read-modify-write of a counter in Redis and check
// that the fencing token only grows. The count is exact only if the lock excludes.

const (
	workerEnv        = "DLOCK_TEST_WORKER"
	workerAddrs      = "DLOCK_TEST_ADDRS"   // comma-separated
	workerCluster    = "DLOCK_TEST_CLUSTER" // "1" for a Cluster
	workerQuorum     = "DLOCK_TEST_QUORUM"  // "1" for NewQuorum over the addrs
	workerGoroutines = "DLOCK_TEST_GOROUTINES"
	workerRounds     = "DLOCK_TEST_ROUNDS"
	workerMode       = "DLOCK_TEST_MODE" // "fairwait", "mutexwait": wait for a FairMutex or a Mutex until killed; "guardpause": guard_pause_test.go
	workerFair       = "DLOCK_TEST_FAIR" // "1": contend for a FairMutex instead of a Mutex
)

// workerTTL is the TTL of the workers' leases.
const workerTTL = 5 * time.Second

type contention struct {
	addrs      []string
	cluster    bool
	quorum     bool
	fair       bool // a FairMutex instead of a Mutex
	processes  int
	goroutines int
	rounds     int
	// maxFree, if set, bounds the longest time the lock sits free between two holds
	// while workers still wait: a liveness bound, not a performance figure.
	maxFree time.Duration
}

func (ct contention) run(t *testing.T, data redis.UniversalClient) {
	t.Helper()
	ctx := ctxTimeout(t, 5*time.Minute)
	env := append(os.Environ(),
		workerEnv+"=1",
		workerAddrs+"="+strings.Join(ct.addrs, ","),
		workerGoroutines+"="+strconv.Itoa(ct.goroutines),
		workerRounds+"="+strconv.Itoa(ct.rounds),
	)
	if ct.cluster {
		env = append(env, workerCluster+"=1")
	}
	if ct.quorum {
		env = append(env, workerQuorum+"=1")
	}
	if ct.fair {
		env = append(env, workerFair+"=1")
	}
	var wg sync.WaitGroup
	errs := make([]error, ct.processes)
	outs := make([][]byte, ct.processes)
	for p := range ct.processes {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
			cmd.Env = env
			outs[p], errs[p] = cmd.CombinedOutput()
		}()
	}
	wg.Wait()
	for p := range ct.processes {
		if errs[p] != nil {
			t.Errorf("worker %d: %v\n%s", p, errs[p], outs[p])
		}
	}
	got, err := data.Get(ctx, "test:counter").Int()
	if err != nil {
		t.Fatalf("read counter: %v", err)
	}
	if want := ct.processes * ct.goroutines * ct.rounds; got != want {
		t.Fatalf("counter = %d, want %d: the lock let two holders in", got, want)
	}
	history := parseOps(outs)
	checkLinearizable(t, history)
	if ct.maxFree > 0 {
		checkFreeTime(t, history, ct.maxFree)
	}
}

// parseOps reads the critical sections the workers reported.
func parseOps(outs [][]byte) []porcupine.Operation {
	var history []porcupine.Operation
	for p, out := range outs {
		for _, line := range strings.Split(string(out), "\n") {
			var call, ret int64
			var old int
			if _, err := fmt.Sscanf(line, "op %d %d %d", &call, &ret, &old); err == nil {
				history = append(history, porcupine.Operation{ClientId: p, Call: call, Return: ret, Output: old})
			}
		}
	}
	return history
}

// checkFreeTime fails if, between two consecutive critical sections, the lock sat free for
// longer than bound. Every worker has rounds left until the last section, so someone waits
// in every gap.
func checkFreeTime(t *testing.T, history []porcupine.Operation, bound time.Duration) {
	t.Helper()
	ops := slices.Clone(history)
	slices.SortFunc(ops, func(a, b porcupine.Operation) int { return cmp.Compare(a.Call, b.Call) })
	var longest time.Duration
	for i := 1; i < len(ops); i++ {
		longest = max(longest, time.Duration(ops[i].Call-ops[i-1].Return))
	}
	t.Logf("the lock sat free for at most %v between %d critical sections", longest, len(ops))
	if longest > bound {
		t.Fatalf("the lock sat free for %v while workers waited; the bound is %v", longest, bound)
	}
}

// Each critical section is a read-modify-write of the counter; the workers report its
// interval and the value it read. Under a lock that excludes, these operations are
// linearizable as a fetch-and-increment register; porcupine checks that from the
// intervals alone, which also catches overlapping holders whose damage happened to cancel.
func checkLinearizable(t *testing.T, history []porcupine.Operation) {
	t.Helper()
	model := porcupine.Model{
		Init: func() any { return 0 },
		Step: func(state, _, output any) (bool, any) {
			return output.(int) == state.(int), state.(int) + 1
		},
	}
	switch porcupine.CheckOperationsTimeout(model, history, time.Minute) {
	case porcupine.Ok:
		t.Logf("%d critical sections are linearizable", len(history))
	case porcupine.Illegal:
		t.Fatalf("the %d critical sections are not linearizable: two holders overlapped", len(history))
	default:
		t.Logf("linearizability check of %d operations timed out", len(history))
	}
}

// runWorker is the body of a worker process; its exit code is its verdict.
func runWorker() int {
	addrs := strings.Split(os.Getenv(workerAddrs), ",")
	if os.Getenv(workerMode) == "guardpause" {
		return guardWorker()
	}
	if mode := os.Getenv(workerMode); mode == "fairwait" || mode == "mutexwait" {
		rdb := redis.NewClient(&redis.Options{Addr: addrs[0]})
		c := dlock.New(rdb)
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		var err error // the test kills this process while it waits
		if mode == "fairwait" {
			_, err = c.FairMutex("fair").Lock(ctx)
		} else {
			_, err = c.Mutex("mutex").Lock(ctx)
		}
		fmt.Println(err)
		return 1
	}
	goroutines, _ := strconv.Atoi(os.Getenv(workerGoroutines))
	rounds, _ := strconv.Atoi(os.Getenv(workerRounds))
	var data redis.UniversalClient
	var c *dlock.Client
	switch {
	case os.Getenv(workerCluster) == "1":
		data = redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		c = dlock.New(data)
	case os.Getenv(workerQuorum) == "1":
		var nodes []redis.UniversalClient
		for _, a := range addrs {
			nodes = append(nodes, redis.NewClient(&redis.Options{Addr: a}))
		}
		data = nodes[0]
		var err error
		if c, err = dlock.NewQuorum(nodes); err != nil {
			fmt.Println(err)
			return 2
		}
	default:
		data = redis.NewClient(&redis.Options{Addr: addrs[0]})
		c = dlock.New(data)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()

	var wg sync.WaitGroup
	failures := make(chan string, goroutines)
	ops := make(chan string, goroutines*rounds)
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range rounds {
				do, reenter := c.Mutex("contended", dlock.TTL(workerTTL)).Do, c.Mutex("contended").TryLock
				if os.Getenv(workerFair) == "1" {
					do, reenter = c.FairMutex("contended", dlock.TTL(workerTTL)).Do, c.FairMutex("contended").TryLock
				}
				err := do(ctx, func(ctx context.Context) error {
					// lease.Context carries the lease: recover its token through a re-entry.
					lease, err := reenter(ctx)
					if err != nil {
						return err
					}
					defer lease.Unlock(ctx)
					last, err := data.Get(ctx, "test:last-token").Uint64()
					if err != nil && err != redis.Nil {
						return err
					}
					if lease.Token() <= last {
						return fmt.Errorf("fencing token %d after %d", lease.Token(), last)
					}
					call := time.Now().UnixNano()
					n, err := data.Get(ctx, "test:counter").Int()
					if err != nil && err != redis.Nil {
						return err
					}
					if err := data.Set(ctx, "test:counter", n+1, 0).Err(); err != nil {
						return err
					}
					ops <- fmt.Sprintf("op %d %d %d", call, time.Now().UnixNano(), n)
					return data.Set(ctx, "test:last-token", lease.Token(), 0).Err()
				})
				if err != nil {
					failures <- err.Error()
					return
				}
			}
		}()
	}
	wg.Wait()
	close(failures)
	close(ops)
	for op := range ops {
		fmt.Println(op)
	}
	code := 0
	for f := range failures {
		fmt.Println(f)
		code = 1
	}
	return code
}

func TestContentionProcessesStandalone(t *testing.T) {
	srv, rdb := standalone(t)
	contention{addrs: []string{srv.Addr}, processes: 3, goroutines: 8, rounds: 15}.run(t, rdb)
}

// TestContentionProcessesFair: a FairMutex excludes across processes whose goroutines
// hand it to each other in runs (fair_run_test.go), and its fencing tokens only grow.
func TestContentionProcessesFair(t *testing.T) {
	srv, rdb := standalone(t)
	contention{addrs: []string{srv.Addr}, fair: true, processes: 3, goroutines: 6, rounds: 15}.run(t, rdb)
	noFairKeysOf(t, rdb, "contended")
}

func TestContentionProcessesCluster(t *testing.T) {
	cl := redistest.StartCluster(t, 3)
	contention{addrs: cl.Addrs, cluster: true, processes: 3, goroutines: 8, rounds: 10}.run(t, cl.Client(t))
}
