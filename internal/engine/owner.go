package engine

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// Owner names: a Client that has an owner name (WithOwner) begins every token it makes
// with its id and keeps the name in one key per node (keyspace.OwnerKey), written without
// waiting, in the round trip of an acquisition or a renewal, and only when the key would
// otherwise expire within ownerRefresh of the lease it labels: once per ownerRefresh per
// node, however many locks the Client takes. The key lasts ownerLife past the lease, so
// it outlives every lease it names; Close deletes it, and it expires by itself if the
// Client stops without one.
const (
	ownerLife    = time.Minute
	ownerRefresh = 30 * time.Second
)

// owner is a Client's name for its holders and where it is written.
type owner struct {
	name   string // "": none; then the Client writes no key and its tokens have no prefix
	prefix string // what begins every token of the Client: its id, or ""
	key    string // the owner key
	// until[i] is when the key last sent to node i expires at the earliest (unix ns):
	// its send time plus its length. Zero: never sent, or the send failed to queue.
	until []atomic.Int64
}

// newOwner is the owner of a Client with the id id (random hex) and n nodes.
func newOwner(cfg ClientConfig, id string, n int) owner {
	if cfg.Owner == "" {
		return owner{}
	}
	short := id[:keyspace.ClientIDLen]
	return owner{name: cfg.Owner, prefix: short, key: keyspace.OwnerKey(cfg.Prefix, short), until: make([]atomic.Int64, n)}
}

// announce makes sure that c's owner key on every node outlasts a lease of length ttl
// taken now, by ownerRefresh at least. The write is sent without waiting for it, in the
// lane of the key lane, so that it goes out with the caller's next call for that key, in
// the same round trip, with ctx's values for the hooks; "" lets it take its own. Its
// failure is not seen: a node that lost the key (restarted empty) has it again at the
// next write, within ownerRefresh, and Inspect shows no owner meanwhile.
func (c *Client) announce(ctx context.Context, ttl time.Duration, lane string) {
	o := &c.owner
	if o.name == "" {
		return
	}
	now := time.Now()
	for i := range o.until {
		u := &o.until[i]
		old := u.Load()
		if old >= now.Add(ttl+ownerRefresh).UnixNano() {
			continue
		}
		life := ttl + ownerLife
		if !u.CompareAndSwap(old, now.Add(life).UnixNano()) {
			continue // another goroutine writes it
		}
		call := &batch.Call{Script: scripts.Owner, Keys: []string{o.key}, Args: []any{o.name, life.Milliseconds()},
			Node: i, Lane: lane, Values: ctx, Deadline: now.Add(nodeTimeout(c, ttl)), Done: make(chan *batch.Call, 1)}
		if !c.batchers[i].TrySend(call) {
			u.CompareAndSwap(now.Add(life).UnixNano(), 0)
		}
	}
}

// retire deletes c's owner key from the nodes it was written to, once c holds nothing and
// takes nothing more (Close, before the batchers stop: their drain sends the calls). A
// write still queued in another lane may land after the delete; the key it brings back
// expires by itself.
func (c *Client) retire() {
	o := &c.owner
	for i := range o.until {
		if o.until[i].Swap(0) == 0 {
			continue // never written there
		}
		call := &batch.Call{Script: scripts.Owner, Keys: []string{o.key}, Args: []any{o.name, 0},
			Node: i, Deadline: time.Now().Add(closeTimeout), Done: make(chan *batch.Call, 1)}
		c.batchers[i].TrySend(call)
	}
}
