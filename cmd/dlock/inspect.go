package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/seed51c676c8/dlock"
)

// The kinds of lock as status, list and unlock name them: dlock's LockInfo kinds, but
// "rw" for an RWMutex (the JSON form is a contract). A key of any other Redis type under the
// prefix is shown with its Redis type as its kind.
const (
	kindMutex     = dlock.KindMutex
	kindFair      = dlock.KindFair
	kindRW        = "rw"
	kindSemaphore = dlock.KindSemaphore
)

// kindOf is the CLI's name of a LockInfo kind.
func kindOf(kind string) string {
	if kind == dlock.KindRWMutex {
		return kindRW
	}
	return kind
}

// lockInfo is what status and list show of one lock on one node. Its JSON form is part of
// the command's contract ('dlock help status'): fields are added, never changed.
type lockInfo struct {
	Name    string `json:"name"`
	Key     string `json:"key"`
	Node    string `json:"node,omitempty"`   // quorum only
	Held    bool   `json:"held"`             // someone holds the lock (for a mutex: its key exists)
	Kind    string `json:"kind,omitempty"`   // mutex, fair, rw, semaphore, or the Redis type of a key dlock does not know
	Holder  string `json:"holder,omitempty"` // the holder's (rw: the writer's) token, for the kinds that have one
	Owner   string `json:"owner,omitempty"`  // the holders' owners (dlock.Holder.Owner), each once, comma-separated; absent when none is known
	Fence   uint64 `json:"fence"`            // the fencing counter: the latest fencing token
	TTLms   *int64 `json:"ttl_ms"`           // milliseconds left; -1 without expiry; null when free
	Waiters int64  `json:"waiters"`          // subscribed processes, or live queue entries (fair, semaphore)

	Mode           string `json:"mode,omitempty"`            // rw: write, read or free
	Readers        *int64 `json:"readers,omitempty"`         // rw: live readers
	WritersWaiting *int64 `json:"writers_waiting,omitempty"` // rw: live waiting writers
	Holders        *int64 `json:"holders,omitempty"`         // semaphore: live holders
	PermitsInUse   *int64 `json:"permits_in_use,omitempty"`  // semaphore: the permits they hold
	Queue          *int64 `json:"queue,omitempty"`           // live entries of a queue (fair, semaphore, or a free lock's)
}

// inspectLock reads one lock on every node with Client.Inspect.
func inspectLock(ctx context.Context, d *deployment, c *dlock.Client, name string) ([]lockInfo, error) {
	in, err := c.Inspect(ctx, name)
	if in == nil { // the name was checked: the Client cannot be used
		return nil, fail(exitFailure, "cannot read the lock %q: %v", name, err)
	}
	infos := make([]lockInfo, len(in.Nodes))
	for i, n := range in.Nodes {
		if n.Err != nil {
			if infos[i], err = foreignLock(ctx, d.nodes[i], in.Key, n.Err); err != nil {
				return nil, redisFailure(fmt.Sprintf("cannot read the lock %q on %s", name, d.nodes[i].name), err)
			}
		} else {
			infos[i] = nodeLockInfo(n, d.quorum())
		}
		infos[i].Name, infos[i].Key = name, in.Key
		if d.quorum() {
			infos[i].Node = d.nodes[i].name
		}
	}
	return infos, nil
}

// foreignLock is the row of a lock key that holds something no dlock lock writes: its
// Redis type is its kind. Any other error, a companion key's included, is returned.
func foreignLock(ctx context.Context, n node, key string, err error) (lockInfo, error) {
	if !errors.Is(err, dlock.ErrNotLock) {
		return lockInfo{}, err
	}
	typ, terr := n.rdb.Type(ctx, key).Result()
	if terr != nil {
		return lockInfo{}, terr
	}
	switch typ {
	case "string", "zset", "none":
		return lockInfo{}, err // the lock key is fine: a companion is not
	}
	pttl, err := n.rdb.PTTL(ctx, key).Result()
	return lockInfo{Kind: typ, Held: true, TTLms: millis(pttl)}, err
}

// nodeLockInfo is the row of one node's reading.
func nodeLockInfo(n dlock.NodeInfo, quorum bool) lockInfo {
	info := lockInfo{Kind: kindOf(n.Kind), Fence: n.Fence, Held: len(n.Holders) > 0, TTLms: holdLeft(n)}
	var readers, holders, permits int64
	info.Owner = owners(n.Holders)
	for _, h := range n.Holders {
		switch {
		case h.Reader:
			readers++
		case n.Kind == dlock.KindSemaphore:
			holders, permits = holders+1, permits+h.Permits
		default:
			info.Holder = h.Token
		}
	}
	waiting := int64(len(n.Waiters))
	switch info.Kind {
	case kindRW:
		info.Readers, info.WritersWaiting = &readers, &waiting
		switch {
		case info.Holder != "":
			info.Mode = "write"
		case readers > 0:
			info.Mode = "read"
		default:
			info.Mode = "free"
		}
	case kindSemaphore:
		info.Holders, info.PermitsInUse = &holders, &permits
		info.Queue = &waiting
	case kindFair:
		info.Queue = &waiting
	case "":
		if waiting > 0 {
			info.Queue = &waiting // a queue left by a lock that is free
		}
	}
	// A queue's waiters are its live entries; they listen on channels of their own (a
	// FairMutex's) or, on a quorum, do not queue (a Semaphore's): count those that do.
	info.Waiters = n.Listeners
	if info.Queue != nil && !quorum {
		info.Waiters = *info.Queue
	}
	return info
}

// owners are the owners of the holders that name one, each once, in the holders' order,
// separated by commas: a Mutex has one holder, an RWMutex's readers and a Semaphore's
// holders may come from several Clients.
func owners(hs []dlock.Holder) string {
	var names []string
	for _, h := range hs {
		if h.Owner != "" && !slices.Contains(names, h.Owner) {
			names = append(names, h.Owner)
		}
	}
	return strings.Join(names, ",")
}

// holdLeft is what the hold has left in ms: the string lock key's (the holder's or the
// writer's), else until the last reader's lease ends, else until the first Semaphore
// holder's does; -1 without expiry; nil when no one holds it.
func holdLeft(n dlock.NodeInfo) *int64 {
	var left time.Duration
	found := false
	for _, h := range n.Holders {
		switch {
		case !h.Reader && n.Kind != dlock.KindSemaphore:
			return millis(h.TTL) // the string key's holder: its lease is the hold
		case !found, h.Reader && h.TTL > left, !h.Reader && h.TTL < left:
			left, found = h.TTL, true
		}
	}
	if !found {
		return nil
	}
	return millis(left)
}

// millis is a TTL in ms, -1 without expiry.
func millis(d time.Duration) *int64 {
	ms := d.Milliseconds()
	if d < 0 {
		ms = -1
	}
	return &ms
}

// detail is the DETAIL column: what matters for the lock's kind beyond HOLDER and TTL.
func (in lockInfo) detail() string {
	var parts []string
	switch in.Kind {
	case kindRW:
		parts = append(parts, in.Mode)
		if r := deref(in.Readers); r > 0 || in.Mode == "read" {
			parts = append(parts, plural(r, "reader"))
		}
		if w := deref(in.WritersWaiting); w > 0 {
			parts = append(parts, plural(w, "writer")+" waiting")
		}
	case kindSemaphore:
		s := "in use " + strconv.FormatInt(deref(in.PermitsInUse), 10)
		if h := deref(in.Holders); h > 0 {
			s += " by " + plural(h, "holder")
		}
		parts = append(parts, s)
	default:
		if in.Kind == "" && deref(in.Queue) > 0 {
			parts = append(parts, "free, "+plural(*in.Queue, "waiter")+" queued")
		}
	}
	return strings.Join(parts, ", ")
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// plural is "1 reader", "2 readers".
func plural(n int64, what string) string {
	if n == 1 {
		return "1 " + what
	}
	return strconv.FormatInt(n, 10) + " " + what + "s"
}
