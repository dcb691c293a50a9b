package main

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// startServers starts n redis-server processes on free loopback ports, with the harness
// the tests use (internal/redistest: no persistence, killed if this process dies). stop
// kills them all; on error, the ones already started are stopped.
func startServers(n int) (servers []*redistest.Server, stop func(), err error) {
	var stops []func()
	stop = func() {
		for _, s := range stops {
			s()
		}
	}
	for range n {
		s, stopOne, err := redistest.StartMain()
		if err != nil {
			stop()
			return nil, nil, fmt.Errorf("the benchmark starts its own redis-servers: %w", err)
		}
		servers, stops = append(servers, s), append(stops, stopOne)
	}
	return servers, stop, nil
}

// redisVersion returns the version that the server at addr reports.
func (b *bench) redisVersion(addr string) string {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	info, err := b.admin(addr).Info(ctx, "server").Result()
	if err != nil {
		return "unknown (" + err.Error() + ")"
	}
	for line := range strings.SplitSeq(info, "\n") {
		if v, ok := strings.CutPrefix(strings.TrimSpace(line), "redis_version:"); ok {
			return v
		}
	}
	return "unknown"
}
