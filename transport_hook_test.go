package dlock_test

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// scriptHook records the SHA1 of every script a client runs, through a single command or
// a pipeline, as a user's tracing or metrics hook would see it.
type scriptHook struct {
	mu   sync.Mutex
	seen map[string]int // by SHA1; EVAL counts under its script's SHA1 too
}

func (h *scriptHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *scriptHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		err := next(ctx, cmd)
		h.record(cmd)
		return err
	}
}

func (h *scriptHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		err := next(ctx, cmds)
		for _, cmd := range cmds {
			h.record(cmd)
		}
		return err
	}
}

func (h *scriptHook) record(cmd redis.Cmder) {
	args := cmd.Args()
	if len(args) < 2 {
		return
	}
	name, _ := args[0].(string)
	body, _ := args[1].(string)
	switch strings.ToLower(name) {
	case "evalsha":
	case "eval":
		body = redis.NewScript(body).Hash()
	default:
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seen[body]++
}

func (h *scriptHook) count(s *redis.Script) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.seen[s.Hash()]
}

// TestUserHookSeesTraffic: a hook that the user registers on the go-redis client sees
// dlock's acquire, renewal and release, on a standalone server and on a Cluster.
func TestUserHookSeesTraffic(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rdb  func(t *testing.T) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T) redis.UniversalClient { _, rdb := standalone(t); return rdb }},
		{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.StartCluster(t, 3).Client(t) }},
		// Settings that once switched dlock to a connection of its own change nothing.
		{"OnConnect", func(t *testing.T) redis.UniversalClient {
			return clientWith(t, func(o *redis.Options) {
				o.OnConnect = func(context.Context, *redis.Conn) error { return nil }
			})
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := lockRenewUnlock(t, tc.rdb(t))
			for _, s := range []struct {
				what   string
				script *redis.Script
			}{{"acquire", scripts.MutexAcquire}, {"renewal", scripts.MutexExtend}, {"release", scripts.MutexRelease}} {
				if h.count(s.script) == 0 {
					t.Errorf("the hook saw no %s (script %s)", s.what, s.script.Hash())
				}
			}
		})
	}
}

// clientWith returns a client of a fresh standalone server with its options changed by f,
// closed at cleanup (after the dlock Clients made later).
func clientWith(t *testing.T, f func(*redis.Options)) *redis.Client {
	t.Helper()
	o := redistest.Start(t).Options()
	f(o)
	rdb := redis.NewClient(o)
	t.Cleanup(func() { _ = rdb.Close() })
	return rdb
}

// lockRenewUnlock takes a lock on rdb with a hook registered, waits for a renewal the hook
// sees, and unlocks; it returns the hook.
func lockRenewUnlock(t *testing.T, rdb redis.UniversalClient) *scriptHook {
	t.Helper()
	h := &scriptHook{seen: make(map[string]int)}
	// Registered after dlock.New, as a program that sets up tracing late would.
	c := newClient(t, rdb)
	rdb.AddHook(h)
	ctx := ctxTimeout(t, 20*time.Second)
	// Renewed every third of its TTL: soon, but with room for a loaded machine's Unlock.
	l := mustLock(t, c.Mutex("hooked", dlock.TTL(time.Second)), ctx)
	deadline := time.Now().Add(10 * time.Second)
	for h.count(scripts.MutexExtend) == 0 && time.Now().Before(deadline) {
		time.Sleep(20 * time.Millisecond)
	}
	if err := l.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	return h
}

// callerKey is the key of a value in a caller's context, as a tracer keeps its span there.
type callerKey struct{}

// contextHook records, for every script a client runs, the caller's value its context
// has, by the script's SHA1.
type contextHook struct {
	mu     sync.Mutex
	values map[string][]any
}

func (h *contextHook) DialHook(next redis.DialHook) redis.DialHook { return next }

func (h *contextHook) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		h.record(ctx, cmd)
		return next(ctx, cmd)
	}
}

func (h *contextHook) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			h.record(ctx, cmd)
		}
		return next(ctx, cmds)
	}
}

func (h *contextHook) record(ctx context.Context, cmd redis.Cmder) {
	sha := scriptSHA(cmd)
	if sha == "" {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.values[sha] = append(h.values[sha], ctx.Value(callerKey{}))
}

func (h *contextHook) of(s *redis.Script) []any {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.values[s.Hash()])
}

// scriptSHA is the SHA1 of the script cmd runs (EVAL counts under its script's), or "".
func scriptSHA(cmd redis.Cmder) string {
	args := cmd.Args()
	if len(args) < 2 {
		return ""
	}
	name, _ := args[0].(string)
	body, _ := args[1].(string)
	switch strings.ToLower(name) {
	case "evalsha":
		return body
	case "eval":
		return redis.NewScript(body).Hash()
	}
	return ""
}

// TestUserHookSeesCallerContext: the scripts of a Lock, an Extend and an Unlock reach a
// user's hook with the values of the ctx given to each (a tracing hook's parent span), on
// a server and on a Cluster; renewals, made for no caller, carry none.
func TestUserHookSeesCallerContext(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name string
		rdb  func(t *testing.T) redis.UniversalClient
	}{
		{"standalone", func(t *testing.T) redis.UniversalClient { _, rdb := standalone(t); return rdb }},
		{"cluster", func(t *testing.T) redis.UniversalClient { return redistest.StartCluster(t, 3).Client(t) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rdb := tc.rdb(t)
			c := newClient(t, rdb)
			h := &contextHook{values: make(map[string][]any)}
			rdb.AddHook(h)
			ctx := ctxTimeout(t, 20*time.Second)
			as := func(who string) context.Context { return context.WithValue(ctx, callerKey{}, who) }

			l := mustLock(t, c.Mutex("traced", dlock.TTL(time.Second)), as("lock")) // room for a loaded machine
			for deadline := time.Now().Add(10 * time.Second); len(h.of(scripts.MutexExtend)) == 0; {
				if time.Now().After(deadline) {
					t.Fatal("no renewal within 10s")
				}
				time.Sleep(20 * time.Millisecond)
			}
			if err := l.Extend(as("extend"), time.Second); err != nil {
				t.Fatal(err)
			}
			if err := l.Unlock(as("unlock")); err != nil {
				t.Fatal(err)
			}
			for _, s := range []struct {
				what   string
				script *redis.Script
				want   []any // every value seen is one of these, and each is seen
			}{
				{"acquire", scripts.MutexAcquire, []any{"lock"}},
				{"extend (Extend, renewals)", scripts.MutexExtend, []any{"extend", nil}},
				{"release", scripts.MutexRelease, []any{"unlock"}},
			} {
				seen := h.of(s.script)
				for _, v := range seen {
					if !slices.Contains(s.want, v) {
						t.Errorf("%s: the hook saw a script with the caller's value %v; want only %v (all seen: %v)", s.what, v, s.want, seen)
					}
				}
				for _, w := range s.want {
					if !slices.Contains(seen, w) {
						t.Errorf("%s: no script with the caller's value %v (all seen: %v)", s.what, w, seen)
					}
				}
			}
		})
	}
}
