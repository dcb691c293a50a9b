package scripts

import (
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

// guardRun runs guard.lua for token in mode on keys with one INCR of counter.
func guardRun(rdb *redis.Client, keys []string, token, mode, counter string) (any, error) {
	return Guard.Run(ctx, rdb, keys, token, mode, 2, "INCR", counter).Result()
}

// TestGuardScript: guard.lua runs the commands for the token that holds the lock, and
// none for another, for a string lock, several lock keys, and a sorted set of holders
// whose lease has not ended. A landing after the lease's end, late or not, runs nothing.
func TestGuardScript(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	k, k2 := keys(t, "guard:a"), keys(t, "guard:b")
	counter := k.Tag + "/n"
	now := time.Now().UnixMilli()
	for _, c := range []struct {
		name  string
		state func()
		keys  []string
		mode  string
		runs  bool
	}{
		{"string held", func() { rdb.Set(ctx, k.Lock, tokenA, time.Minute) }, []string{k.Lock}, "s", true},
		{"string taken", func() { rdb.Set(ctx, k.Lock, tokenB, time.Minute) }, []string{k.Lock}, "s", false},
		{"string gone", func() { rdb.Del(ctx, k.Lock) }, []string{k.Lock}, "s", false},
		{"every name held", func() { rdb.Set(ctx, k.Lock, tokenA, time.Minute); rdb.Set(ctx, k2.Lock, tokenA, time.Minute) }, []string{k.Lock, k2.Lock}, "s", true},
		{"one name lost", func() { rdb.Set(ctx, k2.Lock, tokenB, time.Minute) }, []string{k.Lock, k2.Lock}, "s", false},
		{"member live", func() { rdb.ZAdd(ctx, k.Readers(), redis.Z{Score: float64(now + 60000), Member: tokenA}) }, []string{k.Readers()}, "m", true},
		{"member ended", func() { rdb.ZAdd(ctx, k.Readers(), redis.Z{Score: float64(now - 1), Member: tokenA}) }, []string{k.Readers()}, "m", false},
		{"member absent", func() { rdb.ZRem(ctx, k.Readers(), tokenA) }, []string{k.Readers()}, "m", false},
	} {
		t.Run(c.name, func(t *testing.T) {
			c.state()
			before, _ := rdb.Get(ctx, counter).Int()
			reply, err := guardRun(rdb, c.keys, tokenA, c.mode, counter)
			if err != nil {
				t.Fatal(err)
			}
			after, _ := rdb.Get(ctx, counter).Int()
			ran := after == before+1
			if ran != c.runs {
				t.Fatalf("reply %v, counter %d -> %d; want ran=%v", reply, before, after, c.runs)
			}
			if !c.runs && reply != int64(0) {
				t.Fatalf("refused with %v, want 0", reply)
			}
		})
	}
}

// TestGuardScriptTokenLength: the token is compared whole, whatever its length (a holder
// token may begin with its Client's id).
func TestGuardScriptTokenLength(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "guard:long")
	long := "00112233445566778899aabbccddeeff0011223344556677"
	rdb.Set(ctx, k.Lock, long, time.Minute)
	for token, want := range map[string]bool{long: true, long[:32]: false, long[16:]: false} {
		reply, err := guardRun(rdb, []string{k.Lock}, token, "s", k.Tag+"/n")
		if err != nil || (reply != int64(0)) != want {
			t.Errorf("token %s: %v, %v; want ran=%v", token, reply, err, want)
		}
	}
}

// TestGuardScriptFailedCommand: a command that fails is an error in its place, and the
// others run, as in MULTI.
func TestGuardScriptFailedCommand(t *testing.T) {
	rdb := redistest.Start(t).Client(t)
	k := keys(t, "guard:fail")
	rdb.Set(ctx, k.Lock, tokenA, time.Minute)
	s := k.Tag + "/s"
	reply, err := Guard.Run(ctx, rdb, []string{k.Lock}, tokenA, "s", 3, "SET", s, "x", 2, "INCR", s, 2, "GET", s).Slice()
	if err != nil {
		t.Fatal(err)
	}
	if len(reply) != 3 || reply[0] != "OK" || reply[2] != "x" {
		t.Fatalf("replies %#v", reply)
	}
	if e, ok := reply[1].(error); !ok || e.Error() != "ERR value is not an integer or out of range" {
		t.Fatalf("the failed command's reply %#v", reply[1])
	}
}
