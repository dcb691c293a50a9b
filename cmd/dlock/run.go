package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/pflag"

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
	shared     bool
	exclusive  bool
	permits    int64
	size       int64
	elect      bool
	value      string
	foreground bool
}

func (r *runCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("run")
	r.sf.register(fs)
	fs.DurationVarP(&r.ttl, "ttl", "t", dlock.DefaultTTL, "lease length")
	fs.VarP(&r.wait, "wait", "w", "how long to wait for the lock")
	fs.DurationVar(&r.grace, "grace", 10*time.Second, "SIGTERM to SIGKILL after a lost lock")
	fs.BoolVar(&r.fair, "fair", false, "FairMutex")
	// -s and -x as flock(1) names its shared and exclusive locks.
	fs.BoolVarP(&r.shared, "shared", "s", false, "the read side of an RWMutex")
	fs.BoolVarP(&r.exclusive, "exclusive", "x", false, "the write side of an RWMutex")
	fs.Int64Var(&r.permits, "permits", 0, "permits of a Semaphore")
	fs.Int64Var(&r.size, "size", 0, "the Semaphore's size")
	fs.BoolVar(&r.elect, "elect", false, "lead an Election")
	fs.StringVar(&r.value, "value", "", "the leader's value (--elect)")
	fs.BoolVar(&r.foreground, "foreground", false, "keep the command in dlock's process group")
	return fs
}

// acquirer is what run needs of a lock, whichever kind: one attempt, or a wait until ctx
// is done.
type acquirer struct {
	lock, try func(ctx context.Context) (*dlock.Lease, error)
}

// newAcquirer returns the lock run takes: a Mutex, or what --fair, --shared, --exclusive
// or --permits/--size ask for.
func (r *runCmd) newAcquirer(client *dlock.Client, name string) acquirer {
	ttl := dlock.TTL(r.ttl)
	switch {
	case r.fair:
		m := client.FairMutex(name, ttl)
		return acquirer{m.Lock, m.TryLock}
	case r.shared:
		rw := client.RWMutex(name, ttl)
		return acquirer{rw.RLock, rw.TryRLock}
	case r.exclusive:
		rw := client.RWMutex(name, ttl)
		return acquirer{rw.Lock, rw.TryLock}
	case r.elect:
		e := client.Election(name, ttl)
		return acquirer{
			func(ctx context.Context) (*dlock.Lease, error) { return termLease(e.Campaign(ctx, r.value)) },
			func(ctx context.Context) (*dlock.Lease, error) { return termLease(e.TryCampaign(ctx, r.value)) },
		}
	case r.size > 0:
		s := client.Semaphore(name, r.size, ttl)
		return acquirer{
			func(ctx context.Context) (*dlock.Lease, error) { return s.Acquire(ctx, r.permits) },
			func(ctx context.Context) (*dlock.Lease, error) { return s.TryAcquire(ctx, r.permits) },
		}
	}
	m := client.Mutex(name, ttl)
	return acquirer{m.Lock, m.TryLock}
}

// termLease is the lease of a term: its Unlock resigns.
func termLease(t *dlock.Term, err error) (*dlock.Lease, error) {
	if err != nil {
		return nil, err
	}
	return t.Lease, nil
}

// errFairQuorum refuses --fair on a quorum.
const errFairQuorum = "--fair needs one Redis deployment (a server or a Cluster): the independent servers of a quorum cannot agree on one queue order; drop --fair, or give one server"

// parse reads the command line of run: the lock's name and the command, checked.
func (r *runCmd) parse(args []string) (name string, command []string, err error) {
	fs := r.flagSet()
	pos, command, dash, err := parseArgs(fs, "run", args, 1)
	if err != nil {
		return "", nil, err
	}
	switch {
	case len(pos) == 0:
		return "", nil, usage("run", "give the lock's name and the command: dlock run [flags] NAME -- CMD [ARGS...]")
	case !dash:
		return "", nil, usage("run", "put -- between the lock's name and the command: dlock run [flags] NAME -- CMD [ARGS...]")
	case len(command) == 0:
		return "", nil, usage("run", "give the command to run after --: dlock run [flags] NAME -- CMD [ARGS...]")
	case r.ttl < dlock.MinTTL:
		return "", nil, usage("run", "--ttl %v is too short: a lease must last at least %v", r.ttl, dlock.MinTTL)
	case r.grace < 0:
		return "", nil, usage("run", "--grace must not be negative")
	}
	if err := r.checkKind(fs); err != nil {
		return "", nil, err
	}
	if _, err := keyspace.For(r.sf.prefix, pos[0]); err != nil {
		return "", nil, usage("run", "%v", err)
	}
	return pos[0], command, nil
}

// checkKind checks the flags that choose the kind of lock: at most one kind, for a
// Semaphore permits between 1 and its size (--size alone takes 1 permit), and --value
// only with --elect.
func (r *runCmd) checkKind(fs *pflag.FlagSet) error {
	var given []string
	for _, f := range []string{"shared", "exclusive", "permits", "size", "fair", "elect"} {
		if fs.Changed(f) && (f != "size" || !fs.Changed("permits")) {
			given = append(given, "--"+f)
		}
	}
	if n := len(given); n > 1 {
		return usage("run", "%s and %s exclude each other: give one. The lock is a Mutex by default, a FairMutex with --fair, an RWMutex with --shared (readers) or --exclusive (the writer), a Semaphore with --permits N --size M, an Election's term with --elect", strings.Join(given[:n-1], ", "), given[n-1])
	}
	switch {
	case fs.Changed("value") && !r.elect:
		return usage("run", "--value is the leader's value: it needs --elect")
	case len(r.value) > dlock.MaxValueLen:
		return usage("run", "--value is %d bytes long: at most %d (dlock.MaxValueLen); give a reference (an address, a key) instead", len(r.value), dlock.MaxValueLen)
	}
	switch {
	case !fs.Changed("permits") && !fs.Changed("size"):
		return nil
	case r.size < 1:
		return usage("run", "--permits needs --size M, the Semaphore's size (at least 1): it is not stored in Redis, and every holder must give the same")
	case !fs.Changed("permits"):
		r.permits = 1
	case r.permits < 1 || r.permits > r.size:
		return usage("run", "--permits %d: take from 1 to --size (%d) permits", r.permits, r.size)
	}
	return nil
}

func cmdRun(c *cli, args []string) error {
	r := new(runCmd)
	name, command, err := r.parse(args)
	if err != nil {
		return err
	}
	keys, _ := keyspace.For(r.sf.prefix, name) // checked by parse
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
	if lost {
		return fail(exitLost, "the command was stopped because the lock %q was lost (%s); its work may have overlapped another holder's", name, status)
	}
	return release(c, lease, name, status)
}

// release unlocks the lease after the command exited with status, and returns dlock's
// exit: the command's, or exitLost if the lease had ended before the command did.
func release(c *cli, lease *dlock.Lease, name string, status childStatus) error {
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
	return exitWith(status.code())
}

// acquire takes the lock: TryLock for --wait 0, else Lock bounded by --wait. A signal
// ends the wait.
func (r *runCmd) acquire(ctx context.Context, client *dlock.Client, name string, sigs <-chan os.Signal) (*dlock.Lease, error) {
	l := r.newAcquirer(client, name)
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
			res.lease, res.err = l.try(ctx)
		case r.wait.forever:
			res.lease, res.err = l.lock(ctx)
		default:
			wctx, wcancel := context.WithTimeout(ctx, r.wait.d)
			res.lease, res.err = l.lock(wctx)
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
		return fail(exitNotAcquired, "%s; not acquired %s: %s", r.heldBy(name, held), how, hint)
	}
	return redisFailure(fmt.Sprintf("cannot take the lock %q", name), err)
}

// heldBy says who keeps the lock: held (holderRemaining's text, which reads the lock key
// alone) describes a Mutex's or a FairMutex's holder; the other kinds are held elsewhere
// too (readers, permits), so they are only named.
func (r *runCmd) heldBy(name, held string) string {
	switch {
	case r.shared:
		return fmt.Sprintf("the lock %q is held by a writer, or a writer waits for it (readers wait behind it)", name)
	case r.exclusive:
		return fmt.Sprintf("the lock %q is held by readers or a writer", name)
	case r.size > 0:
		return fmt.Sprintf("the Semaphore %q has fewer than %d of its %d permits free, or others wait for them first", name, r.permits, r.size)
	case r.elect:
		return fmt.Sprintf("the election %q has another leader%s", name, held)
	}
	return fmt.Sprintf("the lock %q is held by another process%s", name, held)
}

// releaseQuietly unlocks a lease whose command never ran; c may be nil.
func releaseQuietly(c *cli, lease *dlock.Lease) {
	ctx, cancel := context.WithTimeout(context.Background(), engine.UnlockTimeout)
	defer cancel()
	if err := lease.Unlock(ctx); err != nil && c != nil && !errors.Is(err, dlock.ErrNotHeld) {
		fmt.Fprintf(c.stderr, "dlock run: warning: could not release the lock: %s\n", explainRedis(err))
	}
}
