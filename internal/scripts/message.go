package scripts

import (
	"strconv"
	"strings"
)

// The messages a release publishes to pass a lock on to one waiter. mutex_release.lua
// publishes them on the lock's channel, fair_release.lua (grants only) on the waiter's
// Client's channel (grant_channel.lua); every other payload ("released", a reader's or a permit's release) just says
// that the lock may be free. This file is the one decoder of them, and the one encoder
// (which the scripts mirror in Lua, and tests use). election_proclaim.lua publishes
// "proclaimed" on an election's own channel (keyspace.Keys.Leader), which only its
// observers hear, and which they do not decode: any message there means "read again".
//
//	turn:<process id>                               the turn: only that process may take the free lock, for a moment
//	grant:<id>:<token>:<fencing counter>:<reserved> the lock itself, set to the request's token
//
// A grant names the process (Mutex: its Client id) or the waiter (FairMutex: its token,
// which is also its id) it is for, the token the lock now holds, the fencing counter after
// the grant reserved its block, and the size of that block: the grantee's fencing tokens
// are counter-reserved+1 up to counter (a FairMutex grant reserves one).

// MessageKind is what a message on a lock's channel does.
type MessageKind int

const (
	Released MessageKind = iota // the lock may be free: any other payload
	Turn                        // a release gave a process the turn
	Granted                     // a release granted a request the lock
)

const (
	turnPrefix  = "turn:"
	grantPrefix = "grant:"
)

// Message is a decoded message on a lock's channel.
type Message struct {
	Kind  MessageKind
	To    string // Turn, Granted: the process (or FairMutex waiter) it is for
	Grant Grant  // Granted only
}

// Grant is what a grant gives its request.
type Grant struct {
	Token    string // the token the lock holds now: the request's
	Counter  uint64 // the fencing counter after the grant: the top of the reserved block
	Reserved uint64 // the block's size, at least 1 and at most Counter
}

// ParseMessage decodes a payload published on a lock's channel. A payload that is neither
// a well-formed turn nor a well-formed grant is Released: it wakes its waiters, which then
// ask Redis.
func ParseMessage(payload string) Message {
	if to, ok := strings.CutPrefix(payload, turnPrefix); ok {
		return Message{Kind: Turn, To: to}
	}
	rest, ok := strings.CutPrefix(payload, grantPrefix)
	if !ok {
		return Message{}
	}
	parts := strings.Split(rest, ":")
	if len(parts) != 4 {
		return Message{}
	}
	counter, err1 := strconv.ParseUint(parts[2], 10, 64)
	reserved, err2 := strconv.ParseUint(parts[3], 10, 64)
	if err1 != nil || err2 != nil || reserved < 1 || reserved > counter {
		return Message{}
	}
	return Message{Kind: Granted, To: parts[0], Grant: Grant{Token: parts[1], Counter: counter, Reserved: reserved}}
}

// String encodes m as the scripts publish it.
func (m Message) String() string {
	switch m.Kind {
	case Turn:
		return turnPrefix + m.To
	case Granted:
		g := m.Grant
		return grantPrefix + m.To + ":" + g.Token + ":" + strconv.FormatUint(g.Counter, 10) + ":" + strconv.FormatUint(g.Reserved, 10)
	}
	return "released"
}
