package guard

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// spec is where a command's keys are, as COMMAND INFO says: positions first to last
// (negative: from the end) every step, counting the command's name as 0; movable keys are
// asked of the server with COMMAND GETKEYS, since only it knows them (ZUNIONSTORE's
// numkeys, EVAL's, SORT ... STORE), and so are a container's (keysOf).
type spec struct {
	first, last, step int
	movable           bool
}

// specs caches each command's spec by its lower-case name: a command's key positions are
// the same on every server, so they are asked once per process.
var specs sync.Map

// CheckSlot returns nil if every key of cmds hashes to slot, else an error that names the
// first that does not. It asks rdb where the keys of commands it has not seen are (one
// COMMAND INFO for all of them), and the keys of a command with movable keys (COMMAND
// GETKEYS, one round trip each). Nothing is written.
func CheckSlot(ctx context.Context, rdb redis.UniversalClient, slot int, lockKey string, cmds []redis.Cmder) error {
	if err := learn(ctx, rdb, cmds); err != nil {
		return err
	}
	for _, cmd := range cmds {
		keys, err := keysOf(ctx, rdb, cmd)
		if err != nil {
			return err
		}
		for _, k := range keys {
			if keyspace.Slot(k) != slot {
				return fmt.Errorf("dlock: %s touches key %q, in Redis Cluster hash slot %d, not the lock's (%d, key %q): only keys of the lock's slot can be written with it; name them with Lease.Key", cmd.FullName(), k, keyspace.Slot(k), slot, lockKey)
			}
		}
	}
	return nil
}

// learn asks COMMAND INFO of the commands of cmds whose specs are not known yet.
func learn(ctx context.Context, rdb redis.UniversalClient, cmds []redis.Cmder) error {
	var names []any
	for _, cmd := range cmds {
		name := cmd.Name()
		if _, ok := specs.Load(name); !ok && !slices.Contains(names, any(name)) {
			names = append(names, name)
		}
	}
	if len(names) == 0 {
		return nil
	}
	info := redis.NewCommandsInfoCmd(ctx, append([]any{"command", "info"}, names...)...)
	if err := rdb.Process(ctx, info); err != nil {
		return fmt.Errorf("dlock: asking where the commands' keys are (COMMAND INFO): %w", err)
	}
	for _, n := range names {
		name := n.(string)
		ci := info.Val()[name]
		if ci == nil { // unknown to the server: keysOf asks COMMAND GETKEYS, whose refusal Guard returns before sending
			specs.Store(name, spec{})
			continue
		}
		specs.Store(name, spec{first: int(ci.FirstKeyPos), last: int(ci.LastKeyPos), step: int(ci.StepCount),
			movable: slices.Contains(ci.Flags, "movablekeys")})
	}
	return nil
}

// keysOf returns the keys of cmd.
func keysOf(ctx context.Context, rdb redis.UniversalClient, cmd redis.Cmder) ([]string, error) {
	v, _ := specs.Load(cmd.Name())
	s, _ := v.(spec)
	args := cmd.Args()
	// A container's keys follow its subcommand (XGROUP CREATE key, OBJECT FREQ key), where
	// COMMAND INFO says none: the server knows them, as it knows movable ones.
	if s.movable || s.first <= 0 && len(args) > 1 {
		get := rdb.CommandGetKeys(ctx, args...)
		if err := get.Err(); err != nil && !strings.Contains(err.Error(), "no key arguments") {
			return nil, fmt.Errorf("dlock: asking which keys %s touches (COMMAND GETKEYS): %w", cmd.FullName(), err)
		}
		return get.Val(), nil
	}
	if s.first <= 0 || s.step <= 0 {
		return nil, nil
	}
	last := s.last
	if last < 0 {
		last += len(args)
	}
	var keys []string
	for i := s.first; i <= last && i < len(args); i += s.step {
		keys = append(keys, argString(args[i]))
	}
	return keys, nil
}

// argString is a key argument as the server sees it.
func argString(a any) string {
	switch x := a.(type) {
	case string:
		return x
	case []byte:
		return string(x)
	}
	return fmt.Sprint(a)
}
