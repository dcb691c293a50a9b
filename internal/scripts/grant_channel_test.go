package scripts

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/keyspace"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestGrantChannelAgreesWithClientOf: the channel a release publishes a grant on
// (grant_channel.lua) is the one the engine listens on for that waiter: the prefix and the
// waiter's Client id where keyspace.ClientOf finds one, else the waiter's own id. The rule
// is written in Lua and in Go; this keeps the two one rule.
func TestGrantChannelAgreesWithClientOf(t *testing.T) {
	t.Parallel()
	rdb := redistest.Start(t).Client(t)
	run := redis.NewScript(grantChannel + "\nreturn grantChannel(ARGV[1], ARGV[2])")
	const prefix = "dlock:{x}:granted:"
	owned := "0123456789abcdef" + tokenA
	for _, waiter := range []string{
		owned,                       // a Client id and 128 random bits
		tokenA,                      // no Client id (WithOwner(""))
		strings.ToUpper(owned),      // not as dlock makes tokens
		owned[:47],                  // one digit short
		owned + "0",                 // one digit long
		"0123456789abcdeg" + tokenA, // not hex
		"",                          // nothing
		"holder:" + owned[:41],      // 48 characters, not hex
	} {
		want := prefix + waiter
		if id, ok := keyspace.ClientOf(waiter); ok {
			want = prefix + id
		}
		got, err := run.Run(ctx, rdb, nil, prefix, waiter).Text()
		if err != nil || got != want {
			t.Errorf("grantChannel(%q) = %q, %v; the engine listens on %q", waiter, got, err, want)
		}
	}
}
