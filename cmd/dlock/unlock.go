package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// unlockCmd holds the flags of 'dlock unlock'.
type unlockCmd struct {
	sf      serverFlags
	force   bool
	readers bool
	json    bool
}

func (u *unlockCmd) flagSet() *pflag.FlagSet {
	fs := newFlagSet("unlock")
	u.sf.register(fs)
	fs.BoolVarP(&u.force, "force", "f", false, "really remove the lock")
	fs.BoolVar(&u.readers, "readers", false, "remove an RWMutex's readers too")
	fs.BoolVarP(&u.json, "json", "j", false, "print JSON")
	return fs
}

// unlockResult is what unlock did to one lock on one node; its JSON form is part of the
// command's contract ('dlock help unlock'): fields are added, never changed.
type unlockResult struct {
	Name    string `json:"name"`
	Key     string `json:"key"`
	Node    string `json:"node,omitempty"` // quorum only
	Removed bool   `json:"removed"`
	Kind    string `json:"kind,omitempty"`   // the kind of what was found; empty when nothing
	Holder  string `json:"holder,omitempty"` // the removed holder's (rw: writer's) token
	TTLms   *int64 `json:"ttl_ms"`           // what its lease had left; -1 without expiry; null when nothing was removed

	Readers        *int64 `json:"readers,omitempty"`         // rw: the live readers found
	ReadersRemoved bool   `json:"readers_removed,omitempty"` // rw: they were removed (--readers)
	Holders        *int64 `json:"holders,omitempty"`         // semaphore: the live holders removed
	PermitsInUse   *int64 `json:"permits_in_use,omitempty"`  // semaphore: the permits they held
	QueueHead      string `json:"queue_head,omitempty"`      // fair: the first live waiter, told on its Client's channel
	Changed        bool   `json:"changed,omitempty"`         // not removed: taken again before every removal (dlock.ErrLockChanged)
}

// readersKept is the number of live readers of an RWMutex that were left holding it.
func (r unlockResult) readersKept() int64 {
	if r.Kind != kindRW || r.ReadersRemoved {
		return 0
	}
	return deref(r.Readers)
}

func cmdUnlock(c *cli, args []string) error {
	u := new(unlockCmd)
	pos, rest, _, err := parseArgs(u.flagSet(), "unlock", args, -1)
	if err != nil {
		return err
	}
	names := append(pos, rest...)
	if len(names) == 0 {
		return usage("unlock", "give the names of the locks: dlock unlock --force [flags] NAME...")
	}
	if !u.force {
		return usage("unlock", "refusing without --force. Removing a lock that is held lets a second holder in while the first may still run (it learns of the loss only at its next renewal), so that only fencing tokens protect your data. If the holder is gone or must be stopped, run: dlock unlock --force %s", strings.Join(names, " "))
	}
	for _, name := range names {
		if _, err = keyspace.For(u.sf.prefix, name); err != nil {
			return usage("unlock", "%v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	_, d, err := u.sf.connect(ctx, c, "unlock")
	if err != nil {
		return err
	}
	defer d.Close()
	lc, err := d.client(u.sf.prefix, slog.New(slog.DiscardHandler))
	if err != nil {
		return err
	}
	defer lc.Close()

	var results []unlockResult
	var refused []string
	for _, name := range names {
		rs, err := u.unlock(ctx, d, lc, name)
		if err != nil {
			return err
		}
		for _, r := range rs {
			results = append(results, r)
			switch {
			case r.Changed:
				refused = append(refused, fmt.Sprintf("the lock %q changed hands before every removal: it is in use, not stuck; nothing was removed. See it with: dlock status %s", r.Name, r.Name))
			case r.Kind != "" && !r.Removed && !isLockKind(r.Kind):
				refused = append(refused, fmt.Sprintf("the key %s is a Redis %s, not a lock that unlock --force can remove; nothing was removed", r.Key, r.Kind))
			case r.readersKept() > 0:
				refused = append(refused, fmt.Sprintf("the RWMutex %q is still held by %s: to remove them too, run: dlock unlock --force --readers %s", r.Name, plural(r.readersKept(), "reader"), r.Name))
			}
			if !u.json {
				fmt.Fprintln(c.stdout, describeUnlock(r))
			}
		}
	}
	if u.json {
		enc := json.NewEncoder(c.stdout)
		enc.SetIndent("", "  ")
		if err := enc.Encode(results); err != nil {
			return err
		}
	}
	if len(refused) > 0 {
		return fail(exitFailure, "%s", strings.Join(refused, "; "))
	}
	return nil
}

func isLockKind(kind string) bool {
	switch kind {
	case kindMutex, kindFair, kindRW, kindSemaphore:
		return true
	}
	return false
}

// unlock removes one lock on every node with Client.ForceUnlock, unless it is an RWMutex
// that readers hold and --readers was not given: then it removes nothing (a reader that
// comes between the check and the removal is removed too).
func (u *unlockCmd) unlock(ctx context.Context, d *deployment, c *dlock.Client, name string) ([]unlockResult, error) {
	if !u.readers {
		rows, err := inspectLock(ctx, d, c, name)
		if err != nil {
			return nil, err
		}
		if slices.ContainsFunc(rows, func(in lockInfo) bool { return in.Kind == kindRW && deref(in.Readers) > 0 }) {
			rs := make([]unlockResult, len(rows))
			for i, in := range rows {
				rs[i] = unlockResult{Name: name, Key: in.Key, Node: in.Node, Kind: in.Kind, Holder: in.Holder, Readers: in.Readers}
			}
			return rs, nil
		}
	}
	in, err := c.ForceUnlock(ctx, name)
	if in == nil { // the name was checked: the Client cannot be used
		return nil, fail(exitFailure, "cannot remove the lock %q: %v", name, err)
	}
	rs := make([]unlockResult, len(in.Nodes))
	for i, n := range in.Nodes {
		switch {
		case errors.Is(n.Err, dlock.ErrLockChanged): // taken again before every removal
			rs[i] = unlockResult{Changed: true}
		case n.Err != nil:
			info, err := foreignLock(ctx, d.nodes[i], in.Key, n.Err)
			if err != nil {
				return nil, redisFailure(fmt.Sprintf("cannot remove the lock %q on %s", name, d.nodes[i].name), err)
			}
			info.Held = false // nothing was removed
			rs[i] = removal(info, n)
		default:
			rs[i] = removal(nodeLockInfo(n, d.quorum()), n)
		}
		rs[i].Name, rs[i].Key = name, in.Key
		if d.quorum() {
			rs[i].Node = d.nodes[i].name
		}
	}
	return rs, nil
}

// removal is what ForceUnlock removed on a node, found there as info.
func removal(info lockInfo, n dlock.NodeInfo) unlockResult {
	r := unlockResult{Kind: info.Kind, Removed: info.Held || info.Kind == kindSemaphore, Holder: info.Holder}
	if r.Removed {
		r.TTLms = info.TTLms
	}
	switch r.Kind {
	case kindRW:
		r.Readers, r.ReadersRemoved = info.Readers, deref(info.Readers) > 0
	case kindSemaphore:
		r.Holders, r.PermitsInUse = info.Holders, info.PermitsInUse
	case kindFair:
		if len(n.Waiters) > 0 {
			r.QueueHead = n.Waiters[0]
		}
	}
	return r
}

// kept is what unlock leaves in place: the fencing counter, and also.
func kept(also string) string {
	const next = ", so the next holder gets a larger token."
	if also == "" {
		return "the fencing counter was kept" + next
	}
	return also + " and the fencing counter were kept" + next
}

// describeUnlock is the line unlock prints for one result.
func describeUnlock(r unlockResult) string {
	where := ""
	if r.Node != "" {
		where = " on " + r.Node
	}
	left := func(what string) string {
		if r.TTLms == nil || *r.TTLms < 0 {
			return what + " had no expiry"
		}
		return fmt.Sprintf("%s had %v left", what, roundDuration(time.Duration(*r.TTLms)*time.Millisecond))
	}
	switch {
	case r.Changed:
		return fmt.Sprintf("not removed: %q%s changed hands before every removal (each removes only the holder it saw): it is in use, not stuck", r.Name, where)
	case r.Kind == kindMutex && r.Removed:
		return fmt.Sprintf("removed the lock %q%s: holder token %s, %s. Waiters were woken; %s", r.Name, where, r.Holder, left("its lease"), kept(""))
	case r.Kind == kindFair && r.Removed:
		woke := "No one waits in its queue"
		if r.QueueHead != "" {
			woke = "The first live waiter of its queue was told on its Client's channel, and takes the lock next"
		}
		return fmt.Sprintf("removed the lock %q (a FairMutex)%s: holder token %s, %s. %s; %s", r.Name, where, r.Holder, left("its lease"), woke, kept("the queue"))
	case r.Kind == kindRW && r.Removed:
		var what []string
		if r.Holder != "" {
			what = append(what, fmt.Sprintf("the write lock (writer token %s, %s)", r.Holder, left("its lease")))
		}
		if r.ReadersRemoved {
			s := "the readers (" + strconv.FormatInt(deref(r.Readers), 10) + " live"
			if r.Holder == "" && deref(r.Readers) > 0 {
				s += ", " + left("the last lease")
			}
			what = append(what, s+")")
		}
		s := fmt.Sprintf("removed %s of %q (an RWMutex)%s. Waiters were woken; %s", strings.Join(what, " and "), r.Name, where, kept("the waiting writers"))
		if n := r.readersKept(); n > 0 {
			s += fmt.Sprintf(" %s still hold it: add --readers to remove them too.", plural(n, "reader"))
		}
		return s
	case r.Kind == kindRW && r.readersKept() > 0:
		return fmt.Sprintf("not removed: %q%s is an RWMutex held by %s; add --readers to remove them: dlock unlock --force --readers %s", r.Name, where, plural(r.readersKept(), "reader"), r.Name)
	case r.Kind == kindSemaphore && r.Removed:
		held := "no live holders"
		if h := deref(r.Holders); h > 0 {
			held = fmt.Sprintf("%s with %s in use, %s", plural(h, "holder"), plural(deref(r.PermitsInUse), "permit"), left("the first lease"))
		}
		return fmt.Sprintf("removed the holders of %q (a Semaphore)%s: %s. Waiters were woken; %s", r.Name, where, held, kept("the queue"))
	case r.Kind != "" && !isLockKind(r.Kind):
		return fmt.Sprintf("not removed: %q%s is a Redis %s, not a dlock lock", r.Name, where, r.Kind)
	}
	return fmt.Sprintf("the lock %q was not held%s: nothing was removed", r.Name, where)
}
