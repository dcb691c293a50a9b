package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"
)

// The flash sale: buyer processes race for a stock kept in Redis, in three rounds:
// without a lock, with dlock, and with dlock and guarded writes (Lease.Guard) while one
// buyer is frozen past its lease; on a quorum, which Guard refuses, round 3 fences the
// store with tokens instead. The buyers are copies of this binary (demo_buyer.go).

const (
	// demoLockName carries the store's hash tag, {flash-sale}, so that on a Cluster the
	// store's keys share the lock's slot and Guard can write them.
	demoLockName = "demo:{flash-sale}"
	// demoPauseTTL is the lease of round 3, short so that the frozen buyer outlives it.
	demoPauseTTL = 500 * time.Millisecond
	// demoRoundTimeout bounds one round; a round takes well under a second.
	demoRoundTimeout = 60 * time.Second
)

// demoCmd holds the flags of 'dlock demo'.
type demoCmd struct {
	sf     serverFlags
	buyers int
	stock  int
}

func (dc *demoCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("demo")
	dc.sf.register(fs)
	fs.IntVar(&dc.buyers, "buyers", 8, "buyer processes")
	fs.IntVar(&dc.stock, "stock", 50, "items for sale")
	return fs
}

// demoRound is one round of the sale.
type demoRound struct {
	label string // in the table
	title string // in the progress line
	mode  string // the buyers' --mode
	ttl   time.Duration
	pause bool // buyer 1 is frozen past its lease
}

var demoRounds = []demoRound{
	{label: "1. without a lock", title: "round 1 of 3, without a lock", mode: "nolock"},
	{label: "2. with dlock", title: "round 2 of 3, with dlock", mode: "lock", ttl: 30 * time.Second},
	{label: "3. with dlock + Guard", title: "round 3 of 3, with dlock and guarded writes", mode: "guarded", ttl: demoPauseTTL, pause: true},
}

// demoFencedRound is round 3 on a quorum, where Guard has no one store to write beside
// the lock: the store checks fencing tokens itself (scripts/demo_buy.lua).
var demoFencedRound = demoRound{label: "3. with dlock + fencing token", title: "round 3 of 3, with dlock and a fencing token", mode: "fenced", ttl: demoPauseTTL, pause: true}

// roundsFor returns the rounds of a sale on srv.
func roundsFor(srv *servers) []demoRound {
	if srv.cluster == nil && len(srv.nodes) > 1 {
		return append(demoRounds[:2:2], demoFencedRound)
	}
	return demoRounds
}

// roundResult is what the store says after a round.
type roundResult struct {
	stock, sold, refused int64
	pausedToken          uint64 // round 3: the frozen buyer's token
	newerToken           int64  // round 3: the largest token the store had seen when it woke
}

func cmdDemo(c *cli, args []string) error {
	dc := new(demoCmd)
	pos, rest, _, err := parseArgs(dc.flagSet(), "demo", args, 0)
	if err != nil {
		return err
	}
	switch {
	case len(pos)+len(rest) > 0:
		return usage("demo", "the demo takes no arguments, only flags")
	case dc.buyers < 2:
		return usage("demo", "--buyers must be at least 2 (round 3 freezes one buyer while the others go on), not %d", dc.buyers)
	case dc.buyers > 64:
		return usage("demo", "--buyers %d is more processes than a demo needs: use at most 64", dc.buyers)
	case dc.stock < 1 || dc.stock > 100000:
		return usage("demo", "--stock must be between 1 and 100000, not %d", dc.stock)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()

	urls := dc.sf.urls(c, "")
	where := ""
	if len(urls) == 0 {
		mr, url, err := startEmbedded()
		if err != nil {
			return err
		}
		defer mr.Close()
		urls, dc.sf.cluster = []string{url}, false
		where = "an embedded Redis (miniredis) at " + mr.Addr()
	}
	srv, err := parseServers(urls, dc.sf.cluster, dc.sf.tls, c.red)
	if err != nil {
		return usage("demo", "%v", err)
	}
	if where == "" {
		where = srv.describe()
	}
	d := srv.open()
	defer d.Close()
	if err := d.check(ctx, func(msg string) { fmt.Fprintf(c.stderr, "dlock demo: %s\n", msg) }); err != nil {
		return err
	}
	store := d.nodes[0].rdb // on a quorum, the store lives on the first server

	fmt.Fprintf(c.stdout, "Flash sale: %d buyer processes, %d items, on %s\n\n", dc.buyers, dc.stock, where)
	prog := &progress{w: c.stdout, tty: isTerminal(c.stdoutFile)}
	rounds := roundsFor(srv)
	results := make([]roundResult, len(rounds))
	for i, r := range rounds {
		results[i], err = dc.round(ctx, store, srv.urls, r, prog)
		prog.end()
		if err != nil {
			_ = storeDelete(context.Background(), store)
			if ctx.Err() != nil {
				return fail(exitSignalBase+int(syscall.SIGINT), "interrupted")
			}
			return redisFailure(fmt.Sprintf("round %q failed", r.label), err)
		}
	}
	_ = storeDelete(ctx, store)
	if !prog.tty {
		fmt.Fprintln(c.stdout)
	}
	dc.printResults(c, rounds, results)
	return dc.check(rounds, results)
}

// soldSoFar is the progress line's status.
func soldSoFar(store redis.Cmdable, stock int) string {
	ctx, cancel := context.WithTimeout(context.Background(), progressEvery)
	defer cancel()
	sold, err := store.Get(ctx, demoKeys.sold).Int64()
	if err != nil {
		sold = 0
	}
	return fmt.Sprintf("%d of %d sold", sold, stock)
}

// round runs one round: reset the store, start the buyers, let them sell, read the store.
// The progress line starts once the store is reset; the caller ends it.
func (dc *demoCmd) round(ctx context.Context, store redis.UniversalClient, urls []string, r demoRound, prog *progress) (roundResult, error) {
	ctx, cancel := context.WithTimeout(ctx, demoRoundTimeout)
	defer cancel()
	var res roundResult
	if err := storeReset(ctx, store, dc.stock); err != nil {
		return res, err
	}
	prog.start(r.title, func() string { return soldSoFar(store, dc.stock) })
	args := func(pause bool) func(int) []string {
		return func(int) []string {
			a := []string{demoBuyerCommand, "--mode", r.mode, "--prefix", dc.sf.prefix, "--ttl", r.ttl.String()}
			if dc.sf.cluster {
				a = append(a, "--cluster")
			}
			if pause {
				a = append(a, "--pause")
			}
			return a
		}
	}
	names := make([]string, dc.buyers)
	for i := range names {
		names[i] = "buyer " + strconv.Itoa(i+1)
	}

	var all []*worker
	defer func() { killAll(all) }()
	if r.pause {
		// Buyer 1 goes first, alone: it takes the lock, reads the stock and freezes.
		first, err := startAll(ctx, names[:1], args(true), urls)
		if err != nil {
			return res, err
		}
		all = append(all, first...)
		if err := goAll(first); err != nil {
			return res, err
		}
		tok, err := first[0].expect(ctx, "paused")
		if err != nil {
			return res, err
		}
		if res.pausedToken, err = strconv.ParseUint(tok, 10, 64); err != nil {
			return res, fmt.Errorf("buyer 1 said %q, not a token", tok)
		}
		// Freeze it while it holds the lock: its renewals stop with it, its lease runs out.
		if err := pause(first[0].cmd.Process); err != nil {
			return res, err
		}
	}
	rest := names[len(all):]
	ws, err := startAll(ctx, rest, args(false), urls)
	if err != nil {
		return res, err
	}
	all = append(all, ws...)
	if err := goAll(ws); err != nil {
		return res, err
	}
	if r.pause {
		// Wake buyer 1 once a newer holder has reached the store, and let it write.
		newer, err := waitForNewerToken(ctx, store, res.pausedToken)
		if err != nil {
			return res, err
		}
		res.newerToken = newer
		if err := resume(all[0].cmd.Process); err != nil {
			return res, err
		}
		if err := all[0].send("resume"); err != nil {
			return res, all[0].failure("did not take its resume signal")
		}
	}
	for _, w := range all {
		if _, err := w.expect(ctx, "done"); err != nil {
			return res, err
		}
		select {
		case <-w.done:
		case <-ctx.Done():
			return res, w.failure("did not exit in time")
		}
		if !w.cmd.ProcessState.Success() {
			return res, w.failure("failed")
		}
	}
	res.stock, res.sold, res.refused, _, err = storeCounts(ctx, store)
	return res, err
}

// waitForNewerToken polls the store until it has seen a token larger than token.
func waitForNewerToken(ctx context.Context, store redis.Cmdable, token uint64) (int64, error) {
	for {
		last, err := store.Get(ctx, demoKeys.lastToken).Int64()
		if err != nil && err != redis.Nil {
			return 0, err
		}
		if last > int64(token) {
			return last, nil
		}
		select {
		case <-ctx.Done():
			return 0, fmt.Errorf("no other buyer took the lock after buyer 1 froze: %w", ctx.Err())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

// printResults prints the table and what it shows.
func (dc *demoCmd) printResults(c *cli, rounds []demoRound, results []roundResult) {
	width := 0
	for _, r := range rounds {
		width = max(width, len(r.label))
	}
	fmt.Fprintf(c.stdout, "%-*s  %6s  %10s  %8s  %20s\n", width, "round", "sold", "stock left", "oversold", "stale writes refused")
	for i, r := range rounds {
		res := results[i]
		refused := "-"
		if r.pause {
			refused = strconv.FormatInt(res.refused, 10)
		}
		fmt.Fprintf(c.stdout, "%-*s  %6d  %10d  %8d  %20s\n", width, r.label, res.sold, res.stock, max(0, res.sold-int64(dc.stock)), refused)
	}
	fmt.Fprintln(c.stdout)

	r1, r2, r3 := results[0], results[1], results[2]
	var b strings.Builder
	if over := r1.sold - int64(dc.stock); over > 0 {
		fmt.Fprintf(&b, "1. Without a lock, buyers read the same stock at once and each sold from it: %d items\n   were sold that did not exist, and the stock went to %d.\n", over, r1.stock)
	} else {
		fmt.Fprintf(&b, "1. Without a lock, this time the buyers happened not to collide; run the demo again\n   (or with more --buyers) to see them oversell.\n")
	}
	fmt.Fprintf(&b, "2. With dlock, each purchase (read the stock, take the payment, write) ran alone:\n   exactly %d sold, stock %d.\n", r2.sold, r2.stock)
	fmt.Fprintf(&b, "3. Buyer 1 was frozen (SIGSTOP) while it held the lock with fencing token %d, and\n   stayed frozen past its %v lease. The other buyers took the lock after it (tokens\n   %d and up) and the sale went on.\n   When buyer 1 woke (SIGCONT) it still believed it held the lock\n   and ", r3.pausedToken, demoPauseTTL, r3.pausedToken+1)
	if rounds[2].mode == "guarded" {
		fmt.Fprintf(&b, "tried its decrement of the stock with Lease.Guard: its lease had ended, so Guard\n   refused it and nothing was applied (a request already on its way would have been\n   refused by Redis, where the lock is no longer its own). A lock cannot stop a holder\n   that does not know it was paused; a write Redis applies only under the lock can.\n")
	} else {
		fmt.Fprintf(&b, "wrote with token %d: the store had already seen token %d, and refused it. A\n   lock cannot stop a holder that does not know it was paused; a fencing token\n   checked by the store can.\n", r3.pausedToken, r3.newerToken)
	}
	fmt.Fprint(c.stdout, b.String())
}

// check is the demo's own verdict: the locked rounds sold exactly the stock, and round 3
// refused the frozen buyer's write.
func (dc *demoCmd) check(rounds []demoRound, results []roundResult) error {
	for i, res := range results[1:] {
		if res.sold != int64(dc.stock) || res.stock != 0 {
			return fail(exitFailure, "round %q sold %d of %d items (stock left %d): the lock did not protect the sale", rounds[i+1].label, res.sold, dc.stock, res.stock)
		}
	}
	if results[2].refused < 1 {
		return fail(exitFailure, "round 3 refused no stale write: the frozen buyer's write should have been refused")
	}
	return nil
}

// buyerReport is what a buyer says when it is done.
type buyerReport struct {
	Bought  int `json:"bought"`
	Refused int `json:"refused"`
}

func (r buyerReport) String() string {
	b, _ := json.Marshal(r)
	return string(b)
}
