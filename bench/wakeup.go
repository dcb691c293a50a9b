package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// wakeEnv makes the binary a wake-up subscriber: its value is the subscriber's JSON config.
const wakeEnv = "DLOCK_BENCH_WAKE"

// wakeInterval is the pause before each PUBLISH of the wake-up scenario: long enough for
// the subscriber's vCPU to go idle (a guest's halt-polling gives up after some 200 µs).
const wakeInterval = 10 * time.Millisecond

type wakeConfig struct {
	Addr    string `json:"addr"`
	Channel string `json:"channel"`
	N       int    `json:"n"`
}

// wakeReport is a subscriber's line: ready once subscribed, then the delays.
type wakeReport struct {
	Ready  bool    `json:"ready,omitempty"`
	Delays []int64 `json:"delays_ns,omitempty"`
}

// wakeMain runs one wake-up subscriber: it subscribes to cfg.Channel, says it is ready,
// and for each of cfg.N messages (a monoNanos reading taken just before the PUBLISH)
// records how long after it this process ran with the message in hand; then it prints
// them. One goroutine reads the connection itself (ReceiveMessage, not go-redis's
// channel): the wake-up of the process is all there is between the socket and the clock.
func wakeMain(spec string, stdout io.Writer) error {
	var cfg wakeConfig
	if err := json.Unmarshal([]byte(spec), &cfg); err != nil {
		return fmt.Errorf("wake-up config: %w", err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rdb := redis.NewClient(&redis.Options{Addr: cfg.Addr})
	defer rdb.Close()
	ps := rdb.Subscribe(ctx, cfg.Channel)
	defer ps.Close()
	if _, err := ps.Receive(ctx); err != nil { // the subscription's confirmation
		return fmt.Errorf("subscribe: %w", err)
	}
	enc := json.NewEncoder(stdout)
	if err := enc.Encode(wakeReport{Ready: true}); err != nil {
		return err
	}
	delays := make([]int64, 0, cfg.N)
	for len(delays) < cfg.N {
		msg, err := ps.ReceiveMessage(ctx)
		now := monoNanos()
		if err != nil {
			return fmt.Errorf("after %d messages: %w", len(delays), err)
		}
		sent, err := strconv.ParseInt(msg.Payload, 10, 64)
		if err != nil {
			return fmt.Errorf("message %q: %w", msg.Payload, err)
		}
		delays = append(delays, now-sent)
	}
	return enc.Encode(wakeReport{Delays: delays})
}

// wakeup measures the wake-up floor: a subscriber process (this binary, re-run) that has
// been idle for wakeInterval gets a PUBLISH; the time from just before the PUBLISH call
// to the subscriber running with the message, on one clock that both processes read
// (monoClock), over half of --duration.
func (b *bench) wakeup(lib string, run int) *result {
	res := newResult(scWakeup, lib, run)
	n := max(10, int(b.cfg.Duration/2/wakeInterval))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second+time.Duration(n)*wakeInterval*2)
	defer cancel()
	channel := fmt.Sprintf("wake:%d", run)
	spec, _ := json.Marshal(wakeConfig{Addr: b.single.Addr, Channel: channel, N: n})
	cmd := exec.CommandContext(ctx, b.self, "-test.run=^$") // the flag: for a test binary
	cmd.Env = append(os.Environ(), wakeEnv+"="+string(spec))
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = sysProcAttr()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return res.fail(err)
	}
	if err := cmd.Start(); err != nil {
		return res.fail(fmt.Errorf("start subscriber: %w", err))
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	out := bufio.NewScanner(stdout)
	out.Buffer(make([]byte, 1<<16), 1<<24)
	if r, err := readWake(out); err != nil || !r.Ready {
		return res.fail(fmt.Errorf("subscriber not ready: %v", err))
	}
	for i := range n {
		time.Sleep(wakeInterval)
		got, err := b.admin(b.single.Addr).Publish(ctx, channel, strconv.FormatInt(monoNanos(), 10)).Result()
		if err == nil && got != 1 {
			err = fmt.Errorf("%d subscribers, want 1", got)
		}
		if err != nil {
			return res.fail(fmt.Errorf("PUBLISH %d: %w", i, err))
		}
	}
	r, err := readWake(out)
	if err != nil {
		return res.fail(err)
	}
	wakeMetrics(res, r.Delays)
	if err := b.requestFloor(ctx, res); err != nil {
		return res.fail(err)
	}
	if err := b.clientFloor(res); err != nil {
		return res.fail(err)
	}
	return res
}

func readWake(out *bufio.Scanner) (wakeReport, error) {
	var r wakeReport
	if !out.Scan() {
		return r, errors.Join(errors.New("subscriber: no report"), out.Err())
	}
	return r, json.Unmarshal(out.Bytes(), &r)
}

func wakeMetrics(res *result, delays []int64) {
	us := make([]float64, len(delays))
	for i, d := range delays {
		us[i] = float64(d) / 1e3
	}
	slices.Sort(us)
	res.Metrics["wake_p50_us"] = quantile(us, 0.5)
	res.Metrics["wake_p90_us"] = quantile(us, 0.9)
	res.Metrics["wakes"] = float64(len(us))
	res.Notes["clock"] = monoClock
}
