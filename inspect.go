package dlock

import (
	"context"

	"github.com/seed51c676c8/dlock/internal/inspect"
)

// ErrNotLock is what Inspect and ForceUnlock report for a lock whose keys hold data no
// dlock lock writes (another program's keys under the same names): they read or remove
// nothing there.
var ErrNotLock = inspect.ErrNotLock

// Inspect reads the lock called name on every node, each at one instant, and writes
// nothing: who holds it, with what time left, its fencing counter, who waits. It does not
// need to know the lock's kind. ctx bounds the whole call.
//
// When a node cannot be read, Inspect returns what the others answered with a
// *QuorumError that names each failing node (NodeInfo.Err says it too); a node whose keys
// hold something no lock writes fails with ErrNotLock.
func (c *Client) Inspect(ctx context.Context, name string) (*LockInfo, error) {
	in, err := inspect.Inspect(ctx, c.e, name)
	return lockInfo(in), err
}

// lockInfo is the engine's reading in the public types, which have the same fields.
func lockInfo(in *inspect.LockInfo) *LockInfo {
	if in == nil {
		return nil
	}
	out := &LockInfo{Name: in.Name, Key: in.Key, Kind: in.Kind, Holders: holders(in.Holders),
		Fence: in.Fence, Waiters: in.Waiters, Nodes: make([]NodeInfo, len(in.Nodes))}
	for i, n := range in.Nodes {
		out.Nodes[i] = NodeInfo{Addr: n.Addr, Kind: n.Kind, Holders: holders(n.Holders),
			Fence: n.Fence, Waiters: n.Waiters, Listeners: n.Listeners, Err: n.Err}
	}
	return out
}

func holders(hs []inspect.Holder) []Holder {
	if hs == nil {
		return nil
	}
	out := make([]Holder, len(hs))
	for i, h := range hs {
		out[i] = Holder(h)
	}
	return out
}
