package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/pflag"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// exitNoLeader is 'dlock leader' finding no term that leads.
const exitNoLeader = 3

// electCmd holds the flags of 'dlock leader' and 'dlock observe'.
type electCmd struct {
	sf   serverFlags
	json bool
}

func (ec *electCmd) flagSet(cmd string) *pflag.FlagSet {
	fs := newFlagSet(cmd)
	ec.sf.register(fs)
	fs.BoolVarP(&ec.json, "json", "j", false, "print JSON")
	return fs
}

// leaderInfo is what leader and observe print of an election. Its JSON form is part of the
// command's contract ('dlock help leader'): fields are added, never changed.
type leaderInfo struct {
	Time    string `json:"time,omitempty"` // observe: when the change was seen
	Name    string `json:"name"`
	Leading bool   `json:"leading"`         // a term leads
	Value   string `json:"value"`           // the leader's value; "" when none
	Token   uint64 `json:"token"`           // the term's fencing token; 0 when none
	Owner   string `json:"owner,omitempty"` // the leader's owner (WithOwner)
	Since   string `json:"since,omitempty"` // when the term began, on the Redis server's clock
	Error   string `json:"error,omitempty"` // observe: why the election could not be read
}

func newLeaderInfo(name string, l dlock.Leader, err error) leaderInfo {
	in := leaderInfo{Name: name}
	switch {
	case errors.Is(err, dlock.ErrNoLeader):
	case err != nil:
		in.Error = explainRedis(err)
	default:
		in.Leading, in.Value, in.Token, in.Owner = true, l.Value, l.Token, l.Owner
		in.Since = l.Since.UTC().Format(time.RFC3339Nano)
	}
	return in
}

// text is in as one line, without its name: values are quoted, so that one with spaces
// or control characters reads as one.
func (in leaderInfo) text() string {
	switch {
	case in.Error != "":
		return "cannot read the election: " + in.Error
	case !in.Leading:
		return "no leader"
	}
	return fmt.Sprintf("%q (term %d, owner %q, since %s)", in.Value, in.Token, in.Owner, in.Since)
}

// parse reads the command line of leader and observe: one election's name.
func (ec *electCmd) parse(cmd string, args []string) (string, error) {
	pos, rest, _, err := parseArgs(ec.flagSet(cmd), cmd, args, -1)
	if err != nil {
		return "", err
	}
	names := append(pos, rest...)
	if len(names) != 1 {
		return "", usage(cmd, "give the election's name: dlock %s [flags] NAME", cmd)
	}
	if _, err := keyspace.For(ec.sf.prefix, names[0]); err != nil {
		return "", usage(cmd, "%v", err)
	}
	return names[0], nil
}

// open connects and returns a Client on the servers, and a func that closes them.
func (ec *electCmd) open(c *cli, cmd string) (*dlock.Client, func(), error) {
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	d, client, err := ec.sf.openClient(ctx, c, cmd, ec.sf.logger(c))
	if err != nil {
		return nil, nil, err
	}
	return client, func() { _ = client.Close(); d.Close() }, nil
}

func cmdLeader(c *cli, args []string) error {
	ec := new(electCmd)
	name, err := ec.parse("leader", args)
	if err != nil {
		return err
	}
	client, done, err := ec.open(c, "leader")
	if err != nil {
		return err
	}
	defer done()
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	l, err := client.Election(name).Leader(ctx)
	if err != nil && !errors.Is(err, dlock.ErrNoLeader) {
		return redisFailure(fmt.Sprintf("cannot read the election %q", name), err)
	}
	var leader dlock.Leader
	if l != nil {
		leader = *l
	}
	in := newLeaderInfo(name, leader, err)
	if ec.json {
		err = json.NewEncoder(c.stdout).Encode(in)
	} else {
		_, err = fmt.Fprintf(c.stdout, "%s: %s\n", name, in.text())
	}
	if err == nil && !in.Leading {
		return exitWith(exitNoLeader)
	}
	return err
}

func cmdObserve(c *cli, args []string) error {
	ec := new(electCmd)
	name, err := ec.parse("observe", args)
	if err != nil {
		return err
	}
	client, done, err := ec.open(c, "observe")
	if err != nil {
		return err
	}
	defer done()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	enc := json.NewEncoder(c.stdout)
	for l := range client.Election(name).Observe(ctx) {
		in := newLeaderInfo(name, l, l.Err)
		in.Time = time.Now().UTC().Format(time.RFC3339Nano)
		if ec.json {
			err = enc.Encode(in)
		} else {
			_, err = fmt.Fprintf(c.stdout, "%s  %s\n", in.Time, in.text())
		}
		if err != nil {
			return err // stdout is gone (a closed pipe)
		}
	}
	return nil
}
