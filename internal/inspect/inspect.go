// Package inspect reads one lock on every node of a Client, whatever its kind, and removes
// it by force: the machinery of dlock's Client.Inspect and Client.ForceUnlock, whose docs
// are the contract. It runs inspect.lua and force_unlock.lua (internal/scripts), decodes
// their replies, counts the listeners of the release channel and summarises the nodes'
// readings as dlock.LockInfo says.
package inspect

import (
	"cmp"
	"context"
	"errors"
	"slices"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock/internal/engine"
	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/quorum"
)

// LockInfo, NodeInfo and Holder are dlock's types of the same names, field for field (the
// public package converts them; their docs there are the contract).
type LockInfo struct {
	Name, Key string
	Kind      string
	Holders   []Holder
	Fence     uint64
	Waiters   []string
	Nodes     []NodeInfo
}

// NodeInfo is dlock.NodeInfo.
type NodeInfo struct {
	Addr      string
	Kind      string
	Holders   []Holder
	Fence     uint64
	Waiters   []string
	Listeners int64
	Err       error
}

// Holder is dlock.Holder.
type Holder struct {
	Token   string
	Owner   string
	Reader  bool
	Permits int64
	TTL     time.Duration
}

// ErrNotLock is dlock.ErrNotLock: a key of the lock holds a Redis type no lock gives it.
var ErrNotLock = errors.New("dlock: the key holds something that is not a dlock lock")

// Inspect is dlock's Client.Inspect on c: it reads the lock called name on every node and
// writes nothing.
func Inspect(ctx context.Context, c *engine.Client, name string) (*LockInfo, error) {
	return readLock(ctx, c, "inspect", name, func(ctx context.Context, n *engine.Node, keys keyspace.Keys) (NodeInfo, error) {
		info, err := runLockScript(ctx, n, keys)
		if err != nil {
			return info, err
		}
		info.Listeners, err = listeners(ctx, n, keys)
		return info, err
	})
}

// readLock checks c, runs read on every node at once for the keys of name and summarises
// what they answered; op names the operation in the error of the nodes that failed.
func readLock(ctx context.Context, c *engine.Client, op, name string,
	read func(context.Context, *engine.Node, keyspace.Keys) (NodeInfo, error)) (*LockInfo, error) {
	if err := c.Usable(); err != nil {
		return nil, err
	}
	keys, err := keyspace.For(c.Prefix(), name)
	if err != nil {
		return nil, err
	}
	infos := make([]NodeInfo, len(c.Nodes()))
	var wg sync.WaitGroup
	for i, n := range c.Nodes() {
		wg.Go(func() {
			info, err := read(ctx, n, keys)
			if err == nil {
				owners(ctx, n, c.Prefix(), info.Holders)
			}
			if err != nil {
				info = NodeInfo{Err: err}
			}
			info.Addr = n.Name
			infos[i] = info
		})
	}
	wg.Wait()
	return summarise(name, keys.Lock, infos), shortfall(c, op, name, infos)
}

// shortfall is the public error naming each node of infos that failed, nil when none did:
// every node is needed, as each holds its own part of what is read or removed.
func shortfall(c *engine.Client, op, name string, infos []NodeInfo) error {
	s := engine.Shortfall{Op: op, Name: name, Needed: len(infos), Total: len(infos)}
	for _, info := range infos {
		if info.Err == nil {
			s.Agreed++
			continue
		}
		s.Nodes = append(s.Nodes, engine.Failure{Addr: info.Addr, Err: info.Err})
	}
	if len(s.Nodes) == 0 {
		return nil
	}
	return c.PublicError(s)
}

// summarise makes the top-level fields of a LockInfo from its nodes' (see dlock.LockInfo).
func summarise(name, key string, nodes []NodeInfo) *LockInfo {
	in := &LockInfo{Name: name, Key: key, Nodes: nodes}
	type seen struct {
		h     Holder
		count int
	}
	var holders []*seen
	byToken := map[string]*seen{}
	for _, n := range nodes {
		if in.Kind == "" {
			in.Kind = n.Kind
		}
		in.Fence = max(in.Fence, n.Fence)
		for _, w := range n.Waiters {
			if !slices.Contains(in.Waiters, w) {
				in.Waiters = append(in.Waiters, w)
			}
		}
		for _, h := range n.Holders {
			s := byToken[h.Token]
			if s == nil {
				s = &seen{h: h}
				byToken[h.Token] = s
				holders = append(holders, s)
			} else if h.TTL >= 0 && (s.h.TTL < 0 || h.TTL < s.h.TTL) {
				s.h.TTL = h.TTL
			}
			s.h.Owner = cmp.Or(s.h.Owner, h.Owner) // a node that lost the owner key has none
			s.count++
		}
	}
	for _, s := range holders {
		if s.count >= quorum.Majority(len(nodes)) {
			in.Holders = append(in.Holders, s.h)
		}
	}
	return in
}
