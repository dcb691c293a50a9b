package inspect

import (
	"context"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/engine"
	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// owners fills in the Owner of each of holders whose token begins with a Client's id,
// from that Client's owner key on node n (internal/engine's owner.go writes it): one
// pipelined GET per Client, in one round trip. A holder whose Client's key is missing,
// or cannot be read (not a string, a node that did not answer), keeps no owner: a label
// must not turn what was read or removed into an error.
func owners(ctx context.Context, n *engine.Node, prefix string, holders []Holder) {
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
		return
	}
	_, _ = pipe.Exec(ctx) // each GET's error leaves its Val empty
	for i := range holders {
		if id, ok := keyspace.ClientOf(holders[i].Token); ok {
			holders[i].Owner = gets[id].Val()
		}
	}
}
