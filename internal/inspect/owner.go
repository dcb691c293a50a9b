package inspect

import (
	"context"
	"errors"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/engine"
	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// owners fills in the Owner of each of holders whose token begins with a Client's id,
// from that Client's owner key on node n (internal/engine's owner.go writes it): one
// pipelined GET per Client, in one round trip. A holder whose Client's key is missing
// keeps no owner.
func owners(ctx context.Context, n *engine.Node, prefix string, holders []Holder) error {
	var pipe redis.Pipeliner
	gets := map[string]*redis.StringCmd{}
	for _, h := range holders {
		id, ok := keyspace.ClientOf(h.Token)
		if !ok || gets[id] != nil {
			continue
		}
		if pipe == nil {
			pipe = n.RDB.Pipeline()
		}
		gets[id] = pipe.Get(ctx, keyspace.OwnerKey(prefix, id))
	}
	if pipe == nil {
		return nil
	}
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return err
	}
	for i := range holders {
		if id, ok := keyspace.ClientOf(holders[i].Token); ok {
			holders[i].Owner = gets[id].Val()
		}
	}
	return nil
}
