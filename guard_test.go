package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// guardedCommands queues, on keys named by key, commands of every reply type a test
// compares: statuses, strings, nils, integers, floats, booleans, TTLs, arrays, maps,
// sorted sets, a failing command, and an untyped one.
func guardedCommands(ctx context.Context, p redis.Pipeliner, key func(string) string) {
	p.Set(ctx, key("s"), "v", 0)
	p.Get(ctx, key("s"))
	p.Get(ctx, key("missing"))
	p.Incr(ctx, key("n"))
	p.IncrByFloat(ctx, key("f"), 1.5)
	p.SetNX(ctx, key("s"), "w", 0)
	p.SetArgs(ctx, key("s"), "w", redis.SetArgs{Mode: "NX"})
	p.Expire(ctx, key("s"), time.Hour)
	p.TTL(ctx, key("s"))
	p.PTTL(ctx, key("missing"))
	p.HSet(ctx, key("h"), "a", "1", "b", "2")
	p.HGetAll(ctx, key("h"))
	p.HMGet(ctx, key("h"), "a", "zz")
	p.RPush(ctx, key("l"), "x", "y")
	p.LRange(ctx, key("l"), 0, -1)
	p.ZAdd(ctx, key("z"), redis.Z{Score: 2.5, Member: "m"}, redis.Z{Score: 1, Member: "k"})
	p.ZRangeWithScores(ctx, key("z"), 0, -1)
	p.ZScore(ctx, key("z"), "m")
	p.ZIncrBy(ctx, key("z"), 0.25, "m")
	p.Incr(ctx, key("s")) // fails: not an integer, and undoes nothing
	p.Do(ctx, "GET", key("n"))
	p.Exists(ctx, key("s"), key("missing"))
	p.Del(ctx, key("n"))
}

// TestGuardRepliesTypedAsPipeline: every reply of a guarded pipeline is what go-redis
// gives for the same commands in a plain pipeline and in a MULTI, error included.
func TestGuardRepliesTypedAsPipeline(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 10*time.Second)
	lease := mustLock(t, newClient(t, rdb).Mutex("guard-types"), ctx)
	got, gerr := lease.Guard(ctx, func(p redis.Pipeliner) error {
		guardedCommands(ctx, p, lease.Key)
		return nil
	})
	for _, plain := range []struct {
		name string
		pipe redis.Pipeliner
	}{{"pipeline", rdb.Pipeline()}, {"tx", rdb.TxPipeline()}} {
		guardedCommands(ctx, plain.pipe, func(k string) string { return plain.name + ":" + k })
		want, werr := plain.pipe.Exec(ctx)
		if fmt.Sprint(gerr) != fmt.Sprint(werr) {
			t.Errorf("%s: Guard's error %v, the pipeline's %v", plain.name, gerr, werr)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d commands guarded, %d in the pipeline", plain.name, len(got), len(want))
		}
		for i := range want {
			gv, wv := reflect.ValueOf(got[i]).MethodByName("Val").Call(nil)[0].Interface(), reflect.ValueOf(want[i]).MethodByName("Val").Call(nil)[0].Interface()
			if reflect.TypeOf(got[i]) != reflect.TypeOf(want[i]) || !reflect.DeepEqual(gv, wv) || fmt.Sprint(got[i].Err()) != fmt.Sprint(want[i].Err()) {
				t.Errorf("%s: %s: guarded %#v (%v), plain %#v (%v)", plain.name, want[i].Name(), gv, got[i].Err(), wv, want[i].Err())
			}
		}
	}
}

// guardKind is one kind of lease and how to take it.
type guardKind struct {
	name string
	lock func(ctx context.Context, c *dlock.Client, name string) (*dlock.Lease, error)
}

var guardKinds = []guardKind{
	{"mutex", func(ctx context.Context, c *dlock.Client, n string) (*dlock.Lease, error) {
		return c.Mutex(n).Lock(ctx)
	}},
	{"fair", func(ctx context.Context, c *dlock.Client, n string) (*dlock.Lease, error) {
		return c.FairMutex(n).Lock(ctx)
	}},
	{"write", func(ctx context.Context, c *dlock.Client, n string) (*dlock.Lease, error) {
		return c.RWMutex(n).Lock(ctx)
	}},
	{"read", func(ctx context.Context, c *dlock.Client, n string) (*dlock.Lease, error) {
		return c.RWMutex(n).RLock(ctx)
	}},
	{"semaphore", func(ctx context.Context, c *dlock.Client, n string) (*dlock.Lease, error) {
		return c.Semaphore(n, 3).Acquire(ctx, 2)
	}},
	{"multi", func(ctx context.Context, c *dlock.Client, n string) (*dlock.Lease, error) {
		return c.MultiMutex([]string{"{" + n + "}:a", "{" + n + "}:b"}).Lock(ctx)
	}},
}

// guardIncr increments key under lease and returns Guard's error.
func guardIncr(ctx context.Context, lease *dlock.Lease, key string) error {
	_, err := lease.Guard(ctx, func(p redis.Pipeliner) error {
		p.Incr(ctx, key)
		return nil
	})
	return err
}

// TestGuardEveryKind: each kind's lease writes while it holds, and nothing once its hold
// is gone from Redis (ForceUnlock, as an expiry or a takeover would leave it) or it was
// unlocked; the refusal wraps ErrNotHeld and ErrLost, and the lease is lost.
func TestGuardEveryKind(t *testing.T) {
	for _, topo := range []struct {
		name string
		rdb  func(t *testing.T) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T) redis.UniversalClient { _, r := standalone(t); return r }},
		{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.StartCluster(t, 3).Client(t) }},
	} {
		t.Run(topo.name, func(t *testing.T) {
			rdb := topo.rdb(t)
			c := newClient(t, rdb)
			for _, k := range guardKinds {
				t.Run(k.name, func(t *testing.T) { guardKindOnce(t, c, rdb, k) })
			}
		})
	}
}

func guardKindOnce(t *testing.T, c *dlock.Client, rdb redis.UniversalClient, k guardKind) {
	ctx := ctxTimeout(t, 20*time.Second)
	name := "guard-" + k.name
	lease, err := k.lock(ctx, c, name)
	if err != nil {
		t.Fatalf("lock: %v", err)
	}
	key := lease.Key("n")
	if err := guardIncr(ctx, lease, key); err != nil {
		t.Fatalf("guarded write while held: %v", err)
	}
	forced := name
	if k.name == "multi" {
		forced = "{" + name + "}:a" // one name lost is the hold lost
	}
	if _, err := c.ForceUnlock(ctx, forced); err != nil {
		t.Fatalf("ForceUnlock: %v", err)
	}
	err = guardIncr(ctx, lease, key)
	if !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrLost) {
		t.Fatalf("guarded write after the hold was removed: %v, want ErrNotHeld and ErrLost", err)
	}
	if lease.Err() != dlock.ErrLost {
		t.Errorf("the refused lease's Err: %v, want ErrLost", lease.Err())
	}
	if n, _ := rdb.Get(ctx, key).Int(); n != 1 {
		t.Errorf("%s = %d after one guarded write and one refused, want 1", key, n)
	}
	again, err := k.lock(ctx, c, name)
	if err != nil {
		t.Fatalf("lock again: %v", err)
	}
	if err := again.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if err := guardIncr(ctx, again, key); !errors.Is(err, dlock.ErrNotHeld) || !errors.Is(err, dlock.ErrReleased) {
		t.Errorf("guarded write after Unlock: %v, want ErrNotHeld and ErrReleased", err)
	}
}
