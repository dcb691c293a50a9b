package dlock

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// checkAcks says what is wrong with WithReplicaAcks for these Redis clients, if anything:
// a client that cannot carry WAIT to the key's master, or one whose ReadTimeout would cut
// a WAIT short (go-redis reads a pipeline's replies within it).
func checkAcks(rdbs []redis.UniversalClient, acks batch.Acks) error {
	if acks.Replicas == 0 {
		return nil
	}
	for _, rdb := range rdbs {
		var read time.Duration
		switch r := rdb.(type) {
		case *redis.Client:
			read = r.Options().ReadTimeout
		case *redis.ClusterClient:
			read = r.Options().ReadTimeout
		default:
			return fmt.Errorf("dlock: WithReplicaAcks needs a *redis.Client (a server or a Sentinel failover client) or a *redis.ClusterClient, not a %T: WAIT must reach the master that ran the write", rdb)
		}
		if read > 0 && acks.Timeout >= read {
			return fmt.Errorf("dlock: WithReplicaAcks timeout %v is not shorter than the Redis client's ReadTimeout %v, which would cut a WAIT short: use a shorter timeout or a longer ReadTimeout", acks.Timeout, read)
		}
	}
	return nil
}
