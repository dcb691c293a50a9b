package main

import (
	"context"
	_ "embed"
	"encoding/json"
	"flag"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/keyspace"
)

var (
	//go:embed scripts/force_unlock.lua
	forceUnlockSource string
	forceUnlockScript = redis.NewScript(forceUnlockSource)
)

// unlockCmd holds the flags of 'dlock unlock'.
type unlockCmd struct {
	sf    serverFlags
	force bool
	json  bool
}

func (u *unlockCmd) flagSet() *flag.FlagSet {
	fs := newFlagSet("unlock")
	u.sf.register(fs)
	fs.BoolVar(&u.force, "force", false, "really remove the lock")
	fs.BoolVar(&u.json, "json", false, "print JSON")
	return fs
}

// unlockResult is what unlock did to one lock on one node; its JSON form is part of the
// command's contract ('dlock help unlock').
type unlockResult struct {
	Name    string `json:"name"`
	Key     string `json:"key"`
	Node    string `json:"node,omitempty"` // quorum only
	Removed bool   `json:"removed"`
	Kind    string `json:"kind,omitempty"`   // the kind of what was found; empty when nothing
	Holder  string `json:"holder,omitempty"` // the removed holder's token
	TTLms   *int64 `json:"ttl_ms"`           // what its lease had left; -1 without expiry; null when nothing was removed
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
	all := make([]keyspace.Keys, len(names))
	for i, name := range names {
		if all[i], err = keyspace.For(u.sf.prefix, name); err != nil {
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

	var results []unlockResult
	var refused []string
	for i, name := range names {
		for _, n := range d.nodes {
			r, err := forceUnlock(ctx, d, n, name, all[i])
			if err != nil {
				return redisFailure(fmt.Sprintf("cannot remove the lock %q on %s", name, n.name), err)
			}
			results = append(results, r)
			if r.Kind != "" && !r.Removed {
				refused = append(refused, fmt.Sprintf("the key %s is a Redis %s, not a lock that unlock --force can remove; nothing was removed", r.Key, r.Kind))
			}
			if !u.json {
				fmt.Fprintln(c.stdout, describeUnlock(d, r))
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

// forceUnlock removes one lock on one node with the force_unlock script.
func forceUnlock(ctx context.Context, d *deployment, n node, name string, keys keyspace.Keys) (unlockResult, error) {
	r := unlockResult{Name: name, Key: keys.Lock}
	if d.quorum() {
		r.Node = n.name
	}
	publish := "PUBLISH"
	if d.cluster {
		publish = "SPUBLISH"
	}
	reply, err := forceUnlockScript.Run(ctx, n.rdb, []string{keys.Lock}, keys.Channel, publish).Slice()
	if err != nil {
		return r, err
	}
	if len(reply) != 3 {
		return r, fmt.Errorf("unexpected reply from the force_unlock script: %v", reply)
	}
	typ, _ := reply[0].(string)
	value, _ := reply[1].(string)
	pttl, _ := reply[2].(int64)
	switch k, known := kindOf(typ); {
	case typ == "none":
	case known && k.forceUnlockable:
		r.Removed, r.Kind, r.Holder, r.TTLms = true, k.name, k.holder(value), &pttl
	default:
		r.Kind = typ
	}
	return r, nil
}

// describeUnlock is the line unlock prints for one result.
func describeUnlock(d *deployment, r unlockResult) string {
	where := ""
	if r.Node != "" {
		where = " on " + r.Node
	}
	switch {
	case r.Removed:
		left := "its lease had no expiry"
		if r.TTLms != nil && *r.TTLms >= 0 {
			left = fmt.Sprintf("its lease had %v left", roundDuration(time.Duration(*r.TTLms)*time.Millisecond))
		}
		return fmt.Sprintf("removed the lock %q%s: holder token %s, %s. Waiters were woken; the fencing counter was kept, so the next holder gets a larger token.", r.Name, where, r.Holder, left)
	case r.Kind != "":
		return fmt.Sprintf("not removed: %q%s is a Redis %s, not a dlock mutex", r.Name, where, r.Kind)
	}
	return fmt.Sprintf("the lock %q was not held%s: nothing was removed", r.Name, where)
}
