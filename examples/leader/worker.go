package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// workerEnv is set, to the worker's configuration in JSON, in the environment of a worker
// process: the example's own binary, started again by startWorker.
const workerEnv = "DLOCK_EXAMPLE_LEADER_WORKER"

// workerConfig tells a worker what to do.
type workerConfig struct {
	Name  string        `json:"name"`
	Redis string        `json:"redis"` // URL
	Run   string        `json:"run"`   // namespace of this run's keys in Redis
	TTL   time.Duration `json:"ttl"`
}

// stepEvery is how often the leader does a step of the work.
const stepEvery = 50 * time.Millisecond

func (c workerConfig) election() string { return "example:leader:" + c.Run }

// stepsKey lists the steps done: "token worker", in the order Redis took them.
func (c workerConfig) stepsKey() string { return "example:leader:" + c.Run + ":steps" }

// startWorker starts a worker process and waits until it is connected.
func startWorker(ctx context.Context, exe string, cfg workerConfig) (*exec.Cmd, error) {
	data, err := json.Marshal(cfg)
	if err != nil {
		return nil, err
	}
	cmd := exec.CommandContext(ctx, exe)
	cmd.Env = append(os.Environ(), workerEnv+"="+string(data))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", cfg.Name, err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("%s did not start: %q, %v", cfg.Name, line, err)
	}
	return cmd, nil
}

// workerMain runs a worker process until SIGINT or SIGTERM and returns its exit code.
func workerMain(cfgJSON string) int {
	var cfg workerConfig
	if err := json.Unmarshal([]byte(cfgJSON), &cfg); err != nil {
		fmt.Fprintf(os.Stderr, "leader worker: bad %s: %v\n", workerEnv, err)
		return 2
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	opts, err := redis.ParseURL(cfg.Redis)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.Name, err)
		return 2
	}
	rdb := redis.NewClient(opts)
	defer rdb.Close()
	client := dlock.New(rdb, dlock.WithOwner(fmt.Sprintf("%s (pid %d)", cfg.Name, os.Getpid())))
	defer client.Close()
	fmt.Println("ready")

	// Lead, do the work while leading, and campaign again after a loss, until stopped.
	err = client.Election(cfg.election(), dlock.TTL(cfg.TTL)).Run(ctx, cfg.Name, func(ctx context.Context) error {
		return work(ctx, rdb, cfg)
	})
	if ctx.Err() == nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", cfg.Name, err)
		return 1
	}
	return 0
}

// work is the singleton's work: a step every stepEvery, each recorded with the term's
// fencing token, until ctx (the term's) ends.
func work(ctx context.Context, rdb *redis.Client, cfg workerConfig) error {
	term, _ := dlock.LeaseFrom(ctx)
	ticker := time.NewTicker(stepEvery)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ticker.C:
		}
		step := fmt.Sprintf("%d %s", term.Token(), cfg.Name)
		if err := rdb.RPush(ctx, cfg.stepsKey(), step).Err(); err != nil && ctx.Err() == nil {
			return err
		}
	}
}
