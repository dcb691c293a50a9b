package guard

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"
)

// MaxArgs bounds the arguments of one guarded command (its name included): guard.lua
// passes them to redis.pcall through Lua's C stack, 8,000 slots, and a command beyond
// them would fail in the script after the commands before it had run.
const MaxArgs = 7900

// Supported returns nil if guard.lua can run cmd (MaxArgs) and Fill can type its reply,
// else an error that names the command and why. The types are go-redis's for the replies
// of the data commands: status, string, integer, float, boolean and TTL replies, and
// arrays and maps of them.
func Supported(cmd redis.Cmder) error {
	if n := len(cmd.Args()); n > MaxArgs {
		return fmt.Errorf("dlock: %s has %d arguments, and Guard sends at most %d per command (Lua's stack): split it into several commands", cmd.Name(), n, MaxArgs)
	}
	switch c := cmd.(type) {
	case *redis.Cmd, *redis.StatusCmd, *redis.StringCmd, *redis.IntCmd, *redis.FloatCmd,
		*redis.BoolCmd, *redis.SliceCmd, *redis.StringSliceCmd, *redis.IntSliceCmd,
		*redis.FloatSliceCmd, *redis.BoolSliceCmd, *redis.MapStringStringCmd,
		*redis.MapStringIntCmd, *redis.ZSliceCmd:
		return nil
	case *redis.DurationCmd:
		if _, ok := precision(c); ok {
			return nil
		}
	}
	return fmt.Errorf("dlock: %s replies as a %T, which Guard cannot type: send it outside Guard, or with pipe.Do, whose reply is untyped", cmd.FullName(), cmd)
}

// precision is the unit of a DurationCmd's reply, which go-redis keeps to itself: known
// by the command's name.
func precision(c *redis.DurationCmd) (time.Duration, bool) {
	switch c.Name() {
	case "ttl", "expiretime":
		return time.Second, true
	case "pttl", "pexpiretime":
		return time.Millisecond, true
	}
	return 0, false
}

// Fill gives each command its reply from guard.lua's array, as go-redis would have read
// it from the command sent alone: an error reply is the command's error, and a nil is
// redis.Nil where go-redis makes it so.
func Fill(cmds []redis.Cmder, replies []any) error {
	if len(replies) != len(cmds) {
		return fmt.Errorf("dlock: %d replies for %d commands", len(replies), len(cmds))
	}
	for i, cmd := range cmds {
		if err, ok := replies[i].(error); ok {
			cmd.SetErr(err)
			continue
		}
		if err := fill(cmd, replies[i]); err != nil {
			cmd.SetErr(err)
		}
	}
	return nil
}

// fill sets cmd's value from v, or returns the error go-redis would have set.
func fill(cmd redis.Cmder, v any) error {
	switch c := cmd.(type) {
	case *redis.Cmd:
		return set(c.SetVal, v, func(v any) (any, error) { return v, nil })
	case *redis.StatusCmd:
		return set(c.SetVal, v, text)
	case *redis.StringCmd:
		return set(c.SetVal, v, text)
	case *redis.IntCmd:
		return set(c.SetVal, v, integer)
	case *redis.FloatCmd:
		return set(c.SetVal, v, float)
	case *redis.BoolCmd:
		if v == nil { // SET NX refused: go-redis says false, with no error
			c.SetVal(false)
			return nil
		}
		return set(c.SetVal, v, boolean)
	case *redis.DurationCmd:
		return set(c.SetVal, v, func(v any) (time.Duration, error) { return duration(c, v) })
	}
	return fillArray(cmd, v)
}

// fillArray is fill for the types whose reply is an array.
func fillArray(cmd redis.Cmder, v any) error {
	switch c := cmd.(type) {
	case *redis.SliceCmd:
		return set(c.SetVal, v, array)
	case *redis.StringSliceCmd:
		return set(c.SetVal, v, each(text, ""))
	case *redis.IntSliceCmd:
		return set(c.SetVal, v, each(integer, 0))
	case *redis.FloatSliceCmd:
		return set(c.SetVal, v, each(float, 0))
	case *redis.BoolSliceCmd:
		return set(c.SetVal, v, each(boolean, false))
	case *redis.MapStringStringCmd:
		return set(c.SetVal, v, pairs(text))
	case *redis.MapStringIntCmd:
		return set(c.SetVal, v, pairs(integer))
	case *redis.ZSliceCmd:
		return set(c.SetVal, v, zslice)
	}
	return Supported(cmd)
}

// set converts v and sets it, or returns why not; a nil is redis.Nil.
func set[T any](setVal func(T), v any, conv func(any) (T, error)) error {
	if v == nil {
		return redis.Nil
	}
	x, err := conv(v)
	if err != nil {
		return err
	}
	setVal(x)
	return nil
}
