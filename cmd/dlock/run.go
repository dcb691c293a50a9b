package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/engine"
	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// runCmd holds the flags of 'dlock run'.
type runCmd struct {
	sf         serverFlags
	ttl        time.Duration
	wait       waitFlag
	grace      time.Duration
	fair       bool
	foreground bool
}

func (r *runCmd) flagSet() *flag.FlagSet {
	fs := newFlagSet("run")
	r.sf.register(fs)
	fs.DurationVar(&r.ttl, "ttl", dlock.DefaultTTL, "lease length")
	fs.Var(&r.wait, "wait", "how long to wait for the lock")
	fs.DurationVar(&r.grace, "grace", 10*time.Second, "SIGTERM to SIGKILL after a lost lock")
	fs.BoolVar(&r.fair, "fair", false, "FairMutex")
	fs.BoolVar(&r.foreground, "foreground", false, "keep the command in dlock's process group")
	return fs
}

// locker is what run needs of a lock: a Mutex or a FairMutex.
type locker interface {
	Lock(ctx context.Context) (*dlock.Lease, error)
	TryLock(ctx context.Context) (*dlock.Lease, error)
}

// newLocker returns the lock run takes.
func (r *runCmd) newLocker(client *dlock.Client, name string) locker {
	if r.fair {
		return client.FairMutex(name, dlock.TTL(r.ttl))
	}
	return client.Mutex(name, dlock.TTL(r.ttl))
}

// errFairQuorum refuses --fair on a quorum.
const errFairQuorum = "--fair needs one Redis deployment (a server or a Cluster): the independent servers of a quorum cannot agree on one queue order; drop --fair, or give one server"

func cmdRun(c *cli, args []string) error {
	r := new(runCmd)
	fs := r.flagSet()
	pos, command, dash, err := parseArgs(fs, "run", args, 1)
	if err != nil {
		return err
	}
	switch {
	case len(pos) == 0:
		return usage("run", "give the lock's name and the command: dlock run [flags] NAME -- CMD [ARGS...]")
	case !dash:
		return usage("run", "put -- between the lock's name and the command: dlock run [flags] NAME -- CMD [ARGS...]")
	case len(command) == 0:
		return usage("run", "give the command to run after --: dlock run [flags] NAME -- CMD [ARGS...]")
	case r.ttl < dlock.MinTTL:
		return usage("run", "--ttl %v is too short: a lease must last at least %v", r.ttl, dlock.MinTTL)
	case r.grace < 0:
		return usage("run", "--grace must not be negative")
	}
	name := pos[0]
	keys, err := keyspace.For(r.sf.prefix, name)
	if err != nil {
		return usage("run", "%v", err)
	}
	grace := min(r.grace, r.ttl/2)

	// Signals are caught from here on: before the child exists they end the wait.
	sigs := notifySignals()
	defer stopSignals(sigs)

	ctx := context.Background()
	srv, err := r.sf.servers(c, "run")
	if err != nil {
		return err
	}
	if r.fair && srv.quorum() {
		return usage("run", errFairQuorum)
	}
	d, err := srv.connect(ctx, c, "run")
	if err != nil {
		return err
	}
	defer d.Close()
	client, err := d.client(r.sf.prefix, r.sf.logger(c))
	if err != nil {
		return err
	}
	defer client.Close()

	lease, err := r.acquire(ctx, client, name, sigs)
	if err != nil {
		return r.notAcquired(c, d, keys, name, err)
	}
	if r.sf.verbose {
		fmt.Fprintf(c.stderr, "dlock run: acquired %q (fencing token %d, lease %v, renewed every %v)\n", name, lease.Token(), r.ttl, engine.RenewalInterval(r.ttl))
	}

	ch, err := startChild(c, command, r.foreground, name, lease.Token())
	if err != nil {
		releaseQuietly(c, lease)
		return err
	}
	status, lost := superviseChild(c, ch, lease, sigs, grace, name)
	if !lost {
		uctx, cancel := context.WithTimeout(context.Background(), engine.UnlockTimeout)
		err := lease.Unlock(uctx)
		cancel()
		switch {
		case errors.Is(err, dlock.ErrLost):
			// The lease had ended before the command did, without dlock noticing in time:
			// the command's work may have overlapped another holder's.
			return fail(exitLost, "the lock %q was lost before the command finished (%s); its work may have overlapped another holder's", name, status)
		case err != nil:
			fmt.Fprintf(c.stderr, "dlock run: warning: could not release %q: %s\n", name, explainRedis(err))
		}
	}
	if lost {
		return fail(exitLost, "the command was stopped because the lock %q was lost (%s); its work may have overlapped another holder's", name, status)
	}
	return exitWith(status.code())
}

// acquire takes the lock: TryLock for --wait 0, else Lock bounded by --wait. A signal
// ends the wait.
func (r *runCmd) acquire(ctx context.Context, client *dlock.Client, name string, sigs <-chan os.Signal) (*dlock.Lease, error) {
	l := r.newLocker(client, name)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type result struct {
		lease *dlock.Lease
		err   error
	}
	done := make(chan result, 1)
	go func() {
		var res result
		switch {
		case !r.wait.forever && r.wait.d == 0:
			res.lease, res.err = l.TryLock(ctx)
		case r.wait.forever:
			res.lease, res.err = l.Lock(ctx)
		default:
			wctx, wcancel := context.WithTimeout(ctx, r.wait.d)
			res.lease, res.err = l.Lock(wctx)
			wcancel()
		}
		done <- res
	}()
	for {
		select {
		case res := <-done:
			// A signal that came while connecting or in the same instant still counts.
			select {
			case sig := <-sigs:
				if endsWait(sig) {
					if res.lease != nil {
						releaseQuietly(nil, res.lease)
					}
					return nil, &interrupted{sig: sig}
				}
			default:
			}
			return res.lease, res.err
		case sig := <-sigs:
			if !endsWait(sig) {
				continue
			}
			cancel()
			if res := <-done; res.lease != nil {
				releaseQuietly(nil, res.lease)
			}
			return nil, &interrupted{sig: sig}
		}
	}
}

// interrupted is a wait ended by a signal.
type interrupted struct{ sig os.Signal }

func (e *interrupted) Error() string { return "interrupted by " + e.sig.String() }

// notAcquired turns an acquisition error into the exit: 75 when the lock is held, with the
// holder's remaining time; 128+N for a signal; 69 or 1 for Redis errors.
func (r *runCmd) notAcquired(c *cli, d *deployment, keys keyspace.Keys, name string, err error) error {
	var intr *interrupted
	switch {
	case errors.As(err, &intr):
		code, what := exitSignalBase, intr.sig.String()
		if s, ok := intr.sig.(syscall.Signal); ok {
			code, what = code+int(s), signalName(s)
		}
		return fail(code, "interrupted while waiting for the lock %q (%s); nothing was run", name, what)
	case errors.Is(err, dlock.ErrNotAcquired), errors.Is(err, context.DeadlineExceeded):
		held, answered := holderRemaining(d, keys)
		if !answered {
			return fail(exitUnavailable, "cannot take the lock %q: Redis stopped answering (%v); check the servers", name, explainRedis(err))
		}
		how := "(--wait 0: one attempt)"
		hint := "try again later, or wait for it with --wait DURATION"
		if r.wait.d > 0 {
			how = fmt.Sprintf("within --wait %v", r.wait.d)
			hint = "try again later, or wait longer with --wait"
		}
		return fail(exitNotAcquired, "the lock %q is held by another process%s; not acquired %s: %s", name, held, how, hint)
	}
	return redisFailure(fmt.Sprintf("cannot take the lock %q", name), err)
}

// releaseQuietly unlocks a lease whose command never ran; c may be nil.
func releaseQuietly(c *cli, lease *dlock.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), engine.UnlockTimeout)
	defer cancel()
	if err := lease.Unlock(ctx); err != nil && c != nil && !errors.Is(err, dlock.ErrNotHeld) {
		fmt.Fprintf(c.stderr, "dlock run: warning: could not release the lock: %s\n", explainRedis(err))
	}
}
