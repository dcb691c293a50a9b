package dlocktest

import (
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/embedredis"
)

// Embedded starts an in-process Redis (miniredis) on a loopback port and returns a dlock
// Client on it, made with opts. Keys expire in step with the wall clock. The Client, its
// connections and the server are closed when the test ends. It needs no redis-server, but
// it is not one: see the package documentation for what it does not model.
func Embedded(t testing.TB, opts ...dlock.Option) *dlock.Client {
	t.Helper()
	addr := startEmbedded(t)
	return newClient(t, newRedisClient(t, &redis.Options{Addr: addr}), opts)
}

// startEmbedded starts miniredis for the test and returns its address.
func startEmbedded(t testing.TB) string {
	t.Helper()
	mr, err := embedredis.Start()
	if err != nil {
		t.Fatalf("dlocktest: %v", err)
	}
	t.Cleanup(mr.Close)
	return mr.Addr()
}
