//go:build tools

package dlock

import (
	_ "github.com/Shopify/toxiproxy/v2"
	_ "github.com/alicebob/miniredis/v2"
	_ "github.com/anishathalye/porcupine"
	_ "github.com/redis/go-redis/v9"
	_ "go.uber.org/goleak"
)
