package main

import (
	"github.com/alicebob/miniredis/v2"

	"github.com/seed51c676c8/dlock/internal/embedredis"
)

// startEmbedded starts the in-process Redis that demo and bench run on when no server is
// given, and returns its URL, which the worker processes connect to. Close it when done.
func startEmbedded() (*miniredis.Miniredis, string, error) {
	mr, err := embedredis.Start()
	if err != nil {
		return nil, "", fail(exitFailure, "%v", err)
	}
	return mr, "redis://" + mr.Addr(), nil
}
