package dlock_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// The election's process tests: the test binary re-runs itself as a worker that campaigns
// (electEnv says how), on the deployment that workerAddrs, workerCluster and workerQuorum
// name (process_test.go).
const (
	electEnv = "DLOCK_TEST_ELECT" // "count": terms that count, as the contention workers do; "lead": lead until lost
	electTTL = "DLOCK_TEST_ELECT_TTL"
)

func init() {
	switch os.Getenv(electEnv) {
	case "count":
		os.Exit(electCountWorker())
	case "lead":
		os.Exit(electLeadWorker())
	}
}

// workerClient is the Client of a worker on the deployment its environment names, and a
// Redis client for data.
func workerClient() (*dlock.Client, redis.UniversalClient, error) {
	addrs := strings.Split(os.Getenv(workerAddrs), ",")
	switch {
	case os.Getenv(workerCluster) == "1":
		data := redis.NewClusterClient(&redis.ClusterOptions{Addrs: addrs})
		return dlock.New(data), data, nil
	case os.Getenv(workerQuorum) == "1":
		var nodes []redis.UniversalClient
		for _, a := range addrs {
			nodes = append(nodes, redis.NewClient(&redis.Options{Addr: a}))
		}
		c, err := dlock.NewQuorum(nodes)
		return c, nodes[0], err
	}
	data := redis.NewClient(&redis.Options{Addr: addrs[0]})
	return dlock.New(data), data, nil
}

// electCountWorker: goroutines that each win rounds terms and, in each, check that the
// token grew and increment a counter non-atomically, reporting each section.
func electCountWorker() int {
	c, data, err := workerClient()
	if err != nil {
		fmt.Println(err)
		return 2
	}
	defer c.Close()
	goroutines, _ := strconv.Atoi(os.Getenv(workerGoroutines))
	rounds, _ := strconv.Atoi(os.Getenv(workerRounds))
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	code := 0
	for g := range goroutines {
		wg.Go(func() {
			e := c.Election("elected", dlock.TTL(workerTTL))
			for r := range rounds {
				if err := countTerm(ctx, e, data, fmt.Sprintf("%d:%d:%d", os.Getpid(), g, r)); err != nil {
					mu.Lock()
					fmt.Println(err)
					code = 1
					mu.Unlock()
					return
				}
			}
		})
	}
	wg.Wait()
	return code
}

// countTerm wins one term with value, checks its token and the value read back, and
// increments the counter inside it.
func countTerm(ctx context.Context, e *dlock.Election, data redis.UniversalClient, value string) error {
	term, err := e.Campaign(ctx, value)
	if err != nil {
		return err
	}
	defer term.Unlock(ctx)
	if l, err := e.Leader(ctx); err != nil || l.Value != value || l.Token != term.Token() {
		return fmt.Errorf("leader %+v, %v while leading as %q with token %d", l, err, value, term.Token())
	}
	last, err := data.Get(ctx, "test:last-token").Uint64()
	if err != nil && err != redis.Nil {
		return err
	}
	if term.Token() <= last {
		return fmt.Errorf("fencing token %d after %d", term.Token(), last)
	}
	call := time.Now().UnixNano()
	n, err := data.Get(ctx, "test:counter").Int()
	if err != nil && err != redis.Nil {
		return err
	}
	if err := data.Set(ctx, "test:counter", n+1, 0).Err(); err != nil {
		return err
	}
	fmt.Printf("op %d %d %d\n", call, time.Now().UnixNano(), n)
	return data.Set(ctx, "test:last-token", term.Token(), 0).Err()
}

// electLeadWorker leads with its pid as the value, says so, and says "lost" as soon as its
// term ends (exit 3).
func electLeadWorker() int {
	c, _, err := workerClient()
	if err != nil {
		fmt.Println(err)
		return 2
	}
	defer c.Close()
	ttl, _ := time.ParseDuration(os.Getenv(electTTL))
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	term, err := c.Election("led", dlock.TTL(ttl)).Campaign(ctx, strconv.Itoa(os.Getpid()))
	if err != nil {
		fmt.Println(err)
		return 2
	}
	fmt.Printf("leading %d\n", term.Token())
	<-term.Done()
	fmt.Printf("lost %v\n", term.Err())
	return 3
}

func (d deployment) env(mode string) []string {
	return append(d.processEnv(), electEnv+"="+mode)
}

// processEnv is the environment of a worker process on d: its addresses and its kind, as
// workerClient reads them.
func (d deployment) processEnv() []string {
	env := append(os.Environ(), workerAddrs+"="+strings.Join(d.addrs, ","))
	switch d.kind {
	case "cluster":
		env = append(env, workerCluster+"=1")
	case "quorum":
		env = append(env, workerQuorum+"=1")
	}
	return env
}

// TestElectionProcesses: at most one leader at a time across processes: the terms'
// sections count exactly, are linearizable, and their tokens only grow.
func TestElectionProcesses(t *testing.T) {
	t.Parallel()
	onDeployments(t, func(t *testing.T, d deployment) {
		ctx := ctxTimeout(t, 4*time.Minute)
		const processes, goroutines, rounds = 3, 4, 8
		env := append(d.env("count"), workerGoroutines+"="+strconv.Itoa(goroutines), workerRounds+"="+strconv.Itoa(rounds))
		outs := make([][]byte, processes)
		var wg sync.WaitGroup
		for p := range processes {
			wg.Go(func() {
				cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
				cmd.Env = env
				out, err := cmd.CombinedOutput()
				if err != nil {
					t.Errorf("worker %d: %v\n%s", p, err, out)
				}
				outs[p] = out
			})
		}
		wg.Wait()
		data := d.nodes[0]
		got, err := data.Get(ctx, "test:counter").Int()
		if err != nil {
			t.Fatal(err)
		}
		if want := processes * goroutines * rounds; got != want {
			t.Fatalf("counter = %d, want %d: two terms led at once", got, want)
		}
		checkLinearizable(t, parseOps(outs))
	})
}

// leader is a worker process that leads the election "led".
type leaderProc struct {
	cmd   *exec.Cmd
	lines chan string
	token uint64
}

// startLeader starts a lead worker and waits until it leads.
func startLeader(t *testing.T, ctx context.Context, d deployment, ttl time.Duration) *leaderProc {
	t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(d.env("lead"), electTTL+"="+ttl.String())
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &leaderProc{cmd: cmd, lines: make(chan string, 16)}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	go func() {
		defer close(p.lines)
		for s := bufio.NewScanner(out); s.Scan(); {
			p.lines <- s.Text()
		}
	}()
	line := p.line(t, 20*time.Second)
	if _, err := fmt.Sscanf(line, "leading %d", &p.token); err != nil {
		t.Fatalf("the worker says %q, not that it leads", line)
	}
	return p
}

func (p *leaderProc) line(t *testing.T, d time.Duration) string {
	t.Helper()
	select {
	case l, ok := <-p.lines:
		if !ok {
			t.Fatal("the worker ended without a word")
		}
		return l
	case <-time.After(d):
		t.Fatalf("the worker said nothing within %v", d)
	}
	return ""
}

// expiry is when the lock key expires on the majority's nodes, read now.
func (d deployment) expiry(t *testing.T, key string) time.Time {
	t.Helper()
	var lefts []time.Duration
	for _, n := range d.nodes {
		lefts = append(lefts, n.PTTL(context.Background(), key).Val())
	}
	slices.Sort(lefts)
	return time.Now().Add(lefts[len(lefts)/2])
}

// TestElectionKilledLeader: a leader killed with SIGKILL is replaced by a waiting candidate
// within its TTL plus a second; with no candidate, Observe reports no leader within a
// bound of the key's expiry. The figures are logged (medians of 3).
func TestElectionKilledLeader(t *testing.T) {
	onDeployments(t, func(t *testing.T, d deployment) {
		ctx := ctxTimeout(t, 2*time.Minute)
		const ttl = time.Second
		e := d.client().Election("led", dlock.TTL(ttl))
		obs := e.Observe(ctx)
		var handover, expiry []time.Duration
		for range 3 {
			p := startLeader(t, ctx, d, ttl)
			until(t, obs, 5*time.Second, "the worker", valued(strconv.Itoa(p.cmd.Process.Pid)))
			got := make(chan time.Time, 1)
			go func() {
				term, err := e.Campaign(ctx, "successor")
				if err != nil {
					t.Error(err)
				}
				got <- time.Now()
				if term != nil && term.Token() <= p.token {
					t.Errorf("the successor's token %d is not above %d", term.Token(), p.token)
				}
				_ = term.Unlock(ctx)
			}()
			time.Sleep(50 * time.Millisecond)
			killed := time.Now()
			_ = p.cmd.Process.Kill()
			handover = append(handover, (<-got).Sub(killed))

			p = startLeader(t, ctx, d, ttl)
			until(t, obs, 5*time.Second, "the worker", valued(strconv.Itoa(p.cmd.Process.Pid)))
			_ = p.cmd.Process.Kill()
			expires := d.expiry(t, "dlock:led")
			until(t, obs, ttl+5*time.Second, "no leader", noLeader)
			expiry = append(expiry, time.Since(expires))
		}
		t.Logf("%s: handover after a SIGKILL (TTL %v): median %v of %v; Observe's delay after an expiry: median %v of %v",
			d.kind, ttl, median(handover), handover, median(expiry), expiry)
		if m := median(handover); m > ttl+time.Second {
			t.Errorf("a killed leader was replaced a median %v after the kill, above TTL+1s", m)
		}
		if m := median(expiry); m > 500*time.Millisecond {
			t.Errorf("Observe reported no leader a median %v after the expiry", m)
		}
	})
}

// TestElectionPausedLeader: a leader paused (SIGSTOP) past its TTL is replaced, and at
// resume learns at once that it no longer leads (its term's Done closes, Err is ErrLost).
func TestElectionPausedLeader(t *testing.T) {
	onDeployments(t, func(t *testing.T, d deployment) {
		ctx := ctxTimeout(t, time.Minute)
		const ttl = time.Second
		p := startLeader(t, ctx, d, ttl)
		if err := p.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		term, err := d.client().Election("led", dlock.TTL(ttl)).Campaign(ctx, "successor")
		if err != nil {
			t.Fatal(err)
		}
		if term.Token() <= p.token {
			t.Fatalf("the successor's token %d is not above %d", term.Token(), p.token)
		}
		resumed := time.Now()
		if err := p.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		line := p.line(t, 5*time.Second)
		t.Logf("%s: the paused leader said %q %v after it resumed", d.kind, line, time.Since(resumed))
		if !strings.HasPrefix(line, "lost") || !strings.Contains(line, dlock.ErrLost.Error()[len("dlock: "):]) {
			t.Fatalf("the paused leader said %q, want lost", line)
		}
		if time.Since(resumed) > 500*time.Millisecond {
			t.Errorf("the paused leader learned of its loss %v after it resumed", time.Since(resumed))
		}
		err = p.cmd.Wait()
		if ee := (*exec.ExitError)(nil); !errors.As(err, &ee) || ee.ExitCode() != 3 {
			t.Fatalf("the worker ended with %v, want exit 3", err)
		}
		_ = term.Unlock(ctx)
	})
}
