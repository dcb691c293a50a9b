package dlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
)

// recorder is a testing.TB that records failures instead of failing the test. Fatal and
// Fatalf end the calling goroutine, as testing's do: call them from record.
type recorder struct {
	testing.TB

	mu   sync.Mutex
	errs []string
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

// record runs fn with a recorder, on a goroutine of its own so that Fatal can end it, and
// returns what it reported.
func record(t *testing.T, fn func(tb testing.TB)) []string {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r.errs
}

func lock(t *testing.T, l dlocktest.Locker) *dlock.Lease {
	t.Helper()
	lease, err := l.TryLock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return lease
}

var ctx = context.Background()

func TestStartClients(t *testing.T) {
	t.Parallel()
	srv := dlocktest.Start(t)
	alice, bob := srv.NewClient(), srv.NewClient()

	held := lock(t, alice.Mutex("job"))
	if _, err := bob.Mutex("job").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Fatalf("bob's TryLock while alice holds the lock: %v, want ErrNotAcquired", err)
	}
	if err := held.Unlock(ctx); err != nil {
		t.Fatal(err)
	}
	if got := lock(t, bob.Mutex("job")).Token(); got != 2 {
		t.Errorf("bob's token = %d, want 2", got)
	}
	if n, err := srv.Client().Exists(ctx, "dlock:job").Result(); err != nil || n != 1 {
		t.Errorf("EXISTS dlock:job through Client = %d, %v; want 1", n, err)
	}
	if srv.URL != "redis://"+srv.Addr || !strings.HasPrefix(srv.Addr, "127.0.0.1:") {
		t.Errorf("Addr %q, URL %q", srv.Addr, srv.URL)
	}
}

func TestServerOptions(t *testing.T) {
	t.Parallel()
	client := dlocktest.Server(t, dlock.WithPrefix("app:"))
	lease := lock(t, client.Mutex("job"))
	defer lease.Unlock(ctx)
	if _, err := client.Mutex("job").TryLock(ctx); !errors.Is(err, dlock.ErrNotAcquired) {
		t.Errorf("second TryLock: %v, want ErrNotAcquired", err)
	}
}

func TestWithArgs(t *testing.T) {
	t.Parallel()
	srv := dlocktest.Start(t, dlocktest.WithArgs("--notify-keyspace-events", "Kgx"))
	got, err := srv.Client().ConfigGet(ctx, "notify-keyspace-events").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, flag := range "Kgx" {
		if !strings.ContainsRune(got["notify-keyspace-events"], flag) {
			t.Errorf("notify-keyspace-events = %q, want it to contain %c", got["notify-keyspace-events"], flag)
		}
	}
}

// TestFaults: each fault of the server ends a lease as lost, and the server serves again
// after it.
func TestFaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name         string
		fault, after func(*dlocktest.RedisServer)
		token        uint64 // of the next acquisition: 1 once the data is gone
	}{
		{"kill", (*dlocktest.RedisServer).Kill, (*dlocktest.RedisServer).Restart, 1},
		{"flush", (*dlocktest.RedisServer).Flush, func(*dlocktest.RedisServer) {}, 1},
		{"pause", (*dlocktest.RedisServer).Pause, (*dlocktest.RedisServer).Resume, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := dlocktest.Start(t)
			client := srv.NewClient()
			lease := lock(t, client.Mutex("job", dlock.TTL(300*time.Millisecond)))
			tt.fault(srv)
			dlocktest.AssertLost(t, lease, 5*time.Second)
			tt.after(srv)
			next, err := client.Mutex("job").Lock(ctx)
			if err != nil {
				t.Fatalf("Lock after %s: %v", tt.name, err)
			}
			defer next.Unlock(ctx)
			if next.Token() != tt.token {
				t.Errorf("token after %s = %d, want %d", tt.name, next.Token(), tt.token)
			}
		})
	}
}

func TestWaitLost(t *testing.T) {
	t.Parallel()
	client := dlocktest.Server(t)
	tests := []struct {
		name   string
		lease  func(t *testing.T) *dlock.Lease
		within time.Duration
		want   string // in the error; "" for nil
	}{
		{"lost", func(t *testing.T) *dlock.Lease {
			return lock(t, client.Mutex("lost", dlock.TTL(50*time.Millisecond), dlock.NoRenew()))
		}, 5 * time.Second, ""},
		{"held", func(t *testing.T) *dlock.Lease {
			return lock(t, client.Mutex("held"))
		}, 50 * time.Millisecond, `lease of "held" (token 1) still held after 50ms`},
		{"released", func(t *testing.T) *dlock.Lease {
			lease := lock(t, client.Mutex("released"))
			if err := lease.Unlock(ctx); err != nil {
				t.Fatal(err)
			}
			return lease
		}, 5 * time.Second, "ended with dlock: lease released, not lost"},
		{"nil", func(*testing.T) *dlock.Lease { return nil }, time.Second, "nil lease"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := dlocktest.WaitLost(tt.lease(t), tt.within)
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Errorf("WaitLost = %v, want %q", err, tt.want)
			}
		})
	}
}

func TestAssertLostFails(t *testing.T) {
	t.Parallel()
	lease := lock(t, dlocktest.Server(t).Mutex("held"))
	errs := record(t, func(tb testing.TB) {
		dlocktest.AssertLost(tb, lease, 10*time.Millisecond)
		tb.Errorf("AssertLost went on")
	})
	if len(errs) != 1 || !strings.Contains(errs[0], "still held") {
		t.Errorf("AssertLost of a held lease reported %q, want one failure that stopped the test", errs)
	}
}

func TestRanUnderLock(t *testing.T) {
	t.Parallel()
	srv := dlocktest.Start(t)
	holder, probe := srv.NewClient(), srv.NewClient()
	rlock := func(t *testing.T) *dlock.Lease {
		lease, err := holder.RWMutex("job").RLock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return lease
	}
	none := func(*testing.T) *dlock.Lease { return nil }
	tests := []struct {
		name string
		hold func(t *testing.T) *dlock.Lease // takes the lock "job", of any kind, or nothing
		lock dlocktest.Locker
		want []string // the failures reported
	}{
		{"mutex held", func(t *testing.T) *dlock.Lease { return lock(t, holder.Mutex("job")) }, probe.Mutex("job"), nil},
		{"held by the same client", func(t *testing.T) *dlock.Lease { return lock(t, holder.Mutex("job")) }, holder.Mutex("job"), nil},
		{"fair held", func(t *testing.T) *dlock.Lease { return lock(t, holder.FairMutex("job")) }, probe.FairMutex("job"), nil},
		{"rw read-held", rlock, probe.RWMutex("job"), nil},
		{"free", none, probe.Mutex("job"), []string{
			`the lock "job" was free when the work started`, `the lock "job" was free when the work ended`}},
		{"nil lock", none, nil, []string{"nil lock"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lease := tt.hold(t)
			ran := false
			errs := record(t, func(tb testing.TB) {
				dlocktest.RanUnderLock(tb, tt.lock, func() { ran = true })
			})
			if !ran {
				t.Error("the work did not run")
			}
			if len(errs) != len(tt.want) {
				t.Fatalf("reported %q, want %q", errs, tt.want)
			}
			for i, want := range tt.want {
				if !strings.Contains(errs[i], want) {
					t.Errorf("failure %d = %q, want %q in it", i, errs[i], want)
				}
			}
			// The checks leave the lock as they found it: free once the holder lets go.
			if lease != nil {
				if err := lease.Unlock(ctx); err != nil {
					t.Fatal(err)
				}
			}
			lock(t, probe.Mutex("job")).Unlock(ctx)
		})
	}
	t.Run("server down", func(t *testing.T) {
		srv.Kill()
		errs := record(t, func(tb testing.TB) { dlocktest.RanUnderLock(tb, probe.Mutex("job"), func() {}) })
		if len(errs) != 2 || !strings.Contains(errs[0], "cannot tell whether the lock is held when the work started") {
			t.Errorf("reported %q, want that it cannot tell, twice", errs)
		}
	})
}

func TestFencedStore(t *testing.T) {
	t.Parallel()
	type put struct {
		key   string
		value string
		token uint64
		stale bool
	}
	tests := []struct {
		name string
		puts []put
		want map[string]string
	}{
		{"newer tokens win", []put{{"k", "a", 1, false}, {"k", "b", 2, false}, {"k", "c", 1, true}}, map[string]string{"k": "b"}},
		{"an equal token writes again", []put{{"k", "a", 3, false}, {"k", "b", 3, false}}, map[string]string{"k": "b"}},
		{"keys apart", []put{{"k", "a", 5, false}, {"j", "b", 1, false}}, map[string]string{"k": "a", "j": "b"}},
		{"token 0 on an empty store", []put{{"k", "a", 0, false}}, map[string]string{"k": "a"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var s dlocktest.FencedStore[string]
			for _, p := range tt.puts {
				err := s.Put(p.key, p.value, p.token)
				if p.stale != errors.Is(err, dlocktest.ErrStaleToken) || !p.stale && err != nil {
					t.Errorf("Put(%q, %q, %d) = %v, want stale: %v", p.key, p.value, p.token, err, p.stale)
				}
			}
			for k, want := range tt.want {
				if got, ok := s.Get(k); !ok || got != want {
					t.Errorf("Get(%q) = %q, %v; want %q", k, got, ok, want)
				}
			}
			if _, ok := s.Get("absent"); ok || s.Token("absent") != 0 {
				t.Error("an absent key has a value or a token")
			}
		})
	}
}

func TestFencedStoreConcurrent(t *testing.T) {
	t.Parallel()
	var s dlocktest.FencedStore[uint64]
	var wg sync.WaitGroup
	for token := range uint64(50) {
		wg.Go(func() { _ = s.Put("k", token, token) })
	}
	wg.Wait()
	if v, _ := s.Get("k"); v != 49 || s.Token("k") != 49 {
		t.Errorf("after concurrent writes: value %d, token %d; want the newest, 49", v, s.Token("k"))
	}
}

// FuzzFencedStore: whatever the order of the writes, a write is accepted exactly when its
// token is at least the newest accepted for its key, and Token reports that newest one.
func FuzzFencedStore(f *testing.F) {
	f.Add([]byte{0, 3, 1, 2, 0, 1, 0, 3})
	f.Fuzz(func(t *testing.T, ops []byte) {
		var s dlocktest.FencedStore[int]
		newest := map[string]uint64{}
		for i := 0; i+1 < len(ops); i += 2 {
			key, token := string('a'+rune(ops[i]%3)), uint64(ops[i+1])
			err := s.Put(key, i, token)
			if stale := token < newest[key]; stale != errors.Is(err, dlocktest.ErrStaleToken) || !stale && err != nil {
				t.Fatalf("Put(%q, token %d) after newest %d: %v", key, token, newest[key], err)
			}
			if err == nil {
				newest[key] = token
			}
			if got := s.Token(key); got != newest[key] {
				t.Fatalf("Token(%q) = %d, want %d", key, got, newest[key])
			}
		}
	})
}

// TestMissingRedisServer: without redis-server the test fails, saying how to install it.
func TestMissingRedisServer(t *testing.T) {
	t.Setenv("REDIS_SERVER", filepath.Join(t.TempDir(), "no-redis-server"))
	errs := record(t, func(tb testing.TB) { dlocktest.Server(tb) })
	if len(errs) != 1 || !strings.Contains(errs[0], "apt-get install -y redis-server") || !strings.Contains(errs[0], "REDIS_SERVER") {
		t.Errorf("Server without redis-server reported %q, want one failure that says how to install it", errs)
	}
}
