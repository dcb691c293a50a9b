package engine

import (
	crand "crypto/rand"
	"encoding/hex"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// newToken returns 128 random bits from crypto/rand, hex-encoded.
func newToken() string { return newPrefixedToken("") }

// newToken is a fresh holder or waiter token of c: 128 random bits after the id that
// finds c's owner name (owner.go), if it has one.
func (c *Client) newToken() string { return newPrefixedToken(c.owner.prefix) }

// newPrefixedToken returns prefix followed by newToken's 128 random bits, in one
// allocation.
func newPrefixedToken(prefix string) string {
	var b [keyspace.RandomLen / 2]byte // 128 bits
	_, _ = crand.Read(b[:])            // never fails on supported platforms (Go 1.24+ panics instead)
	var h [keyspace.RandomLen]byte
	hex.Encode(h[:], b[:])
	var s strings.Builder
	s.Grow(len(prefix) + len(h))
	s.WriteString(prefix)
	s.Write(h[:])
	return s.String()
}

// jitter returns a random duration in [d/2, d), so that contenders that collided retry
// at different times.
func jitter(d time.Duration) time.Duration {
	return d/2 + rand.N(d/2+1)
}

// splitDelay is the random pause after the split vote that follows splits others in a
// row: a few round trips, spread so that the contenders come back one at a time. The
// spread doubles with each split in a row, up to 160ms: nodes held by no one with a
// majority may also be a holder's that lost it, which only its expiry clears.
func splitDelay(splits int) time.Duration {
	return time.Millisecond + rand.N(20*time.Millisecond<<min(splits, 3))
}
