package guard

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// once is a command that go-redis sends once, whatever the client's MaxRetries: the
// guarded commands are not idempotent, and a copy resent after a timeout, with the first
// landing too while the lock still holds, would apply them twice.
type once struct{ *redis.Cmd }

func (once) NoRetry() bool { return true }

// Run runs script (guard.lua) with keys and args on rdb, sent once (see once): EVALSHA,
// and if the server does not know the script, which then ran nothing, SCRIPT LOAD and
// EVALSHA again. Its reply is the script's, or the error of the call.
func Run(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, keys []string, args []any) (any, error) {
	reply, err := evalSHA(ctx, rdb, script, keys, args)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		if err := script.Load(ctx, rdb).Err(); err != nil {
			return nil, err
		}
		reply, err = evalSHA(ctx, rdb, script, keys, args)
	}
	return reply, err
}

func evalSHA(ctx context.Context, rdb redis.UniversalClient, script *redis.Script, keys []string, args []any) (any, error) {
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, "evalsha", script.Hash(), len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	cmd := once{redis.NewCmd(ctx, append(cmdArgs, args...)...)}
	_ = rdb.Process(ctx, cmd)
	return cmd.Result()
}
