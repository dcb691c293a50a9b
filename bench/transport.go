package main

import (
	"fmt"
	"os"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// transportEnv selects the transport that carries dlock's single calls, to measure the
// transports side by side: "lanes" (explicit go-redis pipelines, the default) or "auto"
// (go-redis' AutoPipeliner). Hot-key workers inherit it with the environment.
const transportEnv = "DLOCK_BENCH_TRANSPORT"

func init() {
	switch v := os.Getenv(transportEnv); v {
	case "", "lanes":
	case "auto":
		batch.DefaultTransport = batch.AutoPipeline
	default:
		fmt.Fprintf(os.Stderr, "%s=%q: want lanes or auto\n", transportEnv, v)
		os.Exit(2)
	}
}
