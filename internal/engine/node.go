package engine

import (
	"fmt"
	"log/slog"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/notify"
)

// Node is one Redis deployment of a Client.
type Node struct {
	RDB     redis.UniversalClient
	Name    string // its address, for errors (NodeName)
	hub     *notify.Hub
	cluster bool // Redis Cluster: sharded pub/sub
	db      int  // for keyspace notification channels
}

func newNode(rdb redis.UniversalClient, logger *slog.Logger) *Node {
	n := &Node{RDB: rdb, Name: NodeName(rdb), hub: notify.NewHub(rdb, logger)}
	switch r := rdb.(type) {
	case *redis.ClusterClient:
		n.cluster = true
	case *redis.Client:
		n.db = r.Options().DB
	}
	return n
}

// NodeName names a deployment in errors: its address, never its credentials.
func NodeName(rdb redis.UniversalClient) string {
	switch r := rdb.(type) {
	case *redis.Client:
		return r.Options().Addr
	case *redis.ClusterClient:
		return fmt.Sprintf("cluster%v", r.Options().Addrs)
	case *redis.Ring:
		return fmt.Sprintf("ring%v", r.Options().Addrs)
	}
	return fmt.Sprintf("%T", rdb)
}

// PublishCommand is how a script wakes waiters on n: SPUBLISH on a Cluster (sharded
// pub/sub, so that the message stays on the shard that owns the lock), else PUBLISH.
func (n *Node) PublishCommand() string {
	if n.cluster {
		return "SPUBLISH"
	}
	return "PUBLISH"
}

// keyspaceChannel is where the server publishes the events of key, if it is configured to.
func (n *Node) keyspaceChannel(key string) notify.Channel {
	return notify.Channel{Name: fmt.Sprintf("__keyspace@%d__:%s", n.db, key)}
}

// releaseChannel is where releases of a lock are published.
func (n *Node) releaseChannel(t *Target) notify.Channel {
	return notify.Channel{Name: t.keys.Channel, Sharded: n.cluster}
}
