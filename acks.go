package dlock

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// ackHeadroom is the part of a Redis client's ReadTimeout read that a WAIT must leave for
// the replies of the scripts before it and the network: a fifth of it, at least 100ms.
func ackHeadroom(read time.Duration) time.Duration {
	return max(100*time.Millisecond, read/5)
}

// checkAcks says what is wrong with WithReplicaAcks or WithAOFAcks for these Redis clients:
// a client that cannot carry WAIT to the key's master, or one whose ReadTimeout leaves a
// WAIT too little headroom (ackHeadroom). go-redis reads a pipeline's replies within
// ReadTimeout and, when that read times out, sends the whole pipeline again (up to
// MaxRetries times): the scripts would run again, each followed by another full WAIT, and
// the caller would get a timeout instead of ErrNotReplicated.
func checkAcks(rdbs []redis.UniversalClient, acks batch.Acks) error {
	if !acks.On() {
		return nil
	}
	option := "WithReplicaAcks"
	if acks.AOF {
		option = "WithAOFAcks"
	}
	for _, rdb := range rdbs {
		var read time.Duration
		switch r := rdb.(type) {
		case *redis.Client:
			read = r.Options().ReadTimeout
		case *redis.ClusterClient:
			read = r.Options().ReadTimeout
		default:
			return fmt.Errorf("dlock: %s needs a *redis.Client (a server or a Sentinel failover client) or a *redis.ClusterClient, not a %T: WAIT must reach the master that ran the write", option, rdb)
		}
		if read > 0 && acks.Timeout+ackHeadroom(read) > read {
			return fmt.Errorf("dlock: %s timeout %v leaves too little of the Redis client's ReadTimeout %v for the scripts' replies (it needs %v of it): a read that times out makes go-redis send the pipeline again, scripts and WAIT; use a timeout of at most %v or a longer ReadTimeout", option, acks.Timeout, read, ackHeadroom(read), read-ackHeadroom(read))
		}
	}
	return nil
}
