package engine

import (
	"fmt"
	"strings"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// Replica acknowledgements (WithReplicaAcks): every call goes out in a round trip that
// ends with WAIT (internal/batch, Acks), and a write that fewer replicas acknowledged than
// the Client asks for counts as a failure of its node, like one the node did not answer.
// So an acquisition is undone and reported (attempt.go: a failed node's attempt is
// released), a renewal is retried until the deadline (renewal.go), an Extend leaves the
// lease as it was and an Unlock reports it (hold.go); each error wraps ErrNotReplicated.

// foldAck turns a write of call that was not acknowledged by enough replicas into the
// call's error. Calls that failed, and replies that wrote nothing (a refusal, a key gone:
// zero or less), are left as they are.
func foldAck(a batch.Acks, call *batch.Call) {
	if !a.On() || call.Err != nil || call.Val <= 0 {
		return
	}
	switch {
	case a.AOF && call.AckErr != nil && strings.Contains(call.AckErr.Error(), "unknown command"):
		call.Err = fmt.Errorf("%w: the server has no WAITAOF (Redis 7.2 and later have it), so WithAOFAcks cannot be kept: use WithReplicaAcks with this server, or upgrade it: %w", ErrNotReplicated, call.AckErr)
	case call.AckErr != nil:
		call.Err = fmt.Errorf("%w: %s for %d replicas failed: %w", ErrNotReplicated, ackCommand(a), a.Replicas, call.AckErr)
	case call.Acked < int64(a.Replicas):
		call.Err = fmt.Errorf("%w: %d of %d replicas acknowledged the write within %v (a replica down, lagging or cut off)",
			ErrNotReplicated, call.Acked, a.Replicas, a.Timeout)
	}
}

// ackCommand names the command that acknowledges writes under a.
func ackCommand(a batch.Acks) string {
	if a.AOF {
		return "WAITAOF"
	}
	return "WAIT"
}
