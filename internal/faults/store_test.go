package faults

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/redis/go-redis/v9"
)

// The storage that dlock's fencing tokens protect: a Redis server of its own (not one of
// the lock's), where a write carries the writer's token and is refused if a larger token
// has written before, as docs/guarantees.md asks of storage behind a lock.

// fencedWrite accepts a write unless a larger token has written: KEYS[1] holds the largest
// token accepted, KEYS[2] lists the accepted writes ("token writer at"); ARGV: token,
// writer, at. Replies 1 if accepted, 0 if refused.
var fencedWrite = redis.NewScript(`
local top = tonumber(redis.call('GET', KEYS[1]) or '0')
if tonumber(ARGV[1]) < top then return 0 end
redis.call('SET', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[2], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3])
return 1`)

// unfencedWrite is fencedWrite without the check (the nofence mutation): storage that
// takes whatever a holder sends.
var unfencedWrite = redis.NewScript(`
redis.call('SET', KEYS[1], ARGV[1])
redis.call('RPUSH', KEYS[2], ARGV[1] .. ' ' .. ARGV[2] .. ' ' .. ARGV[3])
return 1`)

func storeKeys(name string) []string {
	return []string{"store:" + name + ":top", "store:" + name + ":log"}
}

// storeWrite writes on behalf of writer holding token; it reports whether it was accepted.
func (a *agent) storeWrite(ctx context.Context, name string, token uint64, writer string, at int64) (bool, error) {
	script := fencedWrite
	if a.cfg.Mutation == mutNoFence {
		script = unfencedWrite
	}
	n, err := script.Run(ctx, a.store, storeKeys(name), token, writer, at).Int()
	return n == 1, err
}

// accepted is one write the storage accepted.
type accepted struct {
	token  uint64
	writer string
	at     int64
}

// storeLog reads the writes the storage accepted for name, in the order it accepted them.
func storeLog(ctx context.Context, store *redis.Client, name string) ([]accepted, error) {
	lines, err := store.LRange(ctx, storeKeys(name)[1], 0, -1).Result()
	if err != nil {
		return nil, err
	}
	out := make([]accepted, 0, len(lines))
	for _, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 {
			return nil, fmt.Errorf("storage log line %q", l)
		}
		tok, err1 := strconv.ParseUint(f[0], 10, 64)
		at, err2 := strconv.ParseInt(f[2], 10, 64)
		if err := errors.Join(err1, err2); err != nil {
			return nil, fmt.Errorf("storage log line %q: %w", l, err)
		}
		out = append(out, accepted{tok, f[1], at})
	}
	return out, nil
}

// The keys dlock uses, as docs/operations.md documents them.
func lockKey(name string) string  { return "dlock:" + name }
func fenceKey(name string) string { return "{dlock:" + name + "}:fence" }

// onNodes runs fn on every node of the lock deployment, all of them even if some fail.
func (a *agent) onNodes(ctx context.Context, fn func(c *redis.Client) error) error {
	var errs []error
	for _, n := range a.nodes {
		errs = append(errs, fn(n))
	}
	return errors.Join(errs...)
}
