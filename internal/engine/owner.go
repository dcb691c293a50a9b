package engine

import (
	"sync/atomic"
	"time"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// Owner names: a Client that has an owner name (WithOwner) begins every token it makes
// with its id and keeps the name in one key per node (keyspace.OwnerKey), written without
// waiting, ahead of an acquisition or Extend in its round trip (batch.Call.Before) or
// beside a renewal batch, and only when the key would
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
// taken now, by ownerRefresh at least, and returns the writes that do it, by node (nil
// when none is due): the caller sends each without waiting for it, ahead of its own call
// to the node (batch.Call.Before), or alone (send). Their failure is not seen: a node that
// lost the key (restarted empty) has it again at the next write, within ownerRefresh, and
// Inspect shows no owner meanwhile. A ttl of 0 labels nothing.
func (c *Client) announce(ttl time.Duration) []*batch.Call {
	o := &c.owner
	if o.name == "" || ttl <= 0 {
		return nil
	}
	var writes []*batch.Call
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
		if writes == nil {
			writes = make([]*batch.Call, len(o.until))
		}
		writes[i] = o.write(i, life, now.Add(nodeTimeout(c, ttl)))
	}
	return writes
}

// namesOwner reports whether a hold's token leads to its owner: any but a TimestampMutex's
// stamp, whose key holds a deadline.
func namesOwner(token any) bool {
	_, ok := token.(string)
	return ok
}

// ownerWrite attaches the owner write due for call's node, if any, ahead of call.
func ownerWrite(writes []*batch.Call, call *batch.Call) {
	if writes != nil && writes[call.Node] != nil {
		w := writes[call.Node]
		// In the same round trip: its hooks see the caller's values, and it ends with the
		// call's deadline, not later (a round trip lasts until its calls' latest deadline).
		w.Values, w.Deadline = call.Values, call.Deadline
		call.Before, writes[call.Node] = w, nil
	}
}

// sendOwner sends the owner writes of announce, each in a round trip of its own.
func (c *Client) sendOwner(writes []*batch.Call) {
	for i, w := range writes {
		if w != nil && !c.batchers[i].TrySend(w) {
			c.owner.until[i].Store(0) // not sent: the next acquisition or renewal tries again
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
		c.batchers[i].TrySend(o.write(i, 0, time.Now().Add(closeTimeout)))
	}
}

// write is owner.lua's call to node i: the key made to last life from when it lands, or
// deleted (life 0). No one waits for its reply.
func (o *owner) write(i int, life time.Duration, deadline time.Time) *batch.Call {
	return &batch.Call{Script: scripts.Owner, Keys: []string{o.key}, Args: []any{o.name, life.Milliseconds()},
		Node: i, Deadline: deadline, Done: make(chan *batch.Call, 1)}
}
