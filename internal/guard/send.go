package guard

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/scripts"
)

// once is a command that go-redis sends once, whatever the client's MaxRetries: the
// guarded commands are not idempotent, and a copy resent after a timeout, with the first
// landing too while the lock still holds, would apply them twice.
type once struct{ *redis.Cmd }

func (once) NoRetry() bool { return true }

// Run runs guard.lua (scripts.Guard) with keys and args on rdb, sent once (see once):
// EVALSHA, and if the server does not know the script, which then ran nothing, EVAL of its
// source, one round trip that also makes the server know it again. Its reply is the
// script's, or the error of the call.
func Run(ctx context.Context, rdb redis.UniversalClient, keys []string, args []any) (any, error) {
	reply, err := eval(ctx, rdb, "evalsha", scripts.Guard.Hash(), keys, args)
	if err != nil && redis.HasErrorPrefix(err, "NOSCRIPT") {
		reply, err = eval(ctx, rdb, "eval", scripts.GuardSrc, keys, args)
	}
	return reply, err
}

// eval sends command (EVAL or EVALSHA) of script, its source or its SHA1, once.
func eval(ctx context.Context, rdb redis.UniversalClient, command, script string, keys []string, args []any) (any, error) {
	cmdArgs := make([]any, 0, 3+len(keys)+len(args))
	cmdArgs = append(cmdArgs, command, script, len(keys))
	for _, k := range keys {
		cmdArgs = append(cmdArgs, k)
	}
	cmd := once{redis.NewCmd(ctx, append(cmdArgs, args...)...)}
	_ = rdb.Process(ctx, cmd)
	return cmd.Result()
}
