package notify

import (
	"errors"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

func track(t *testing.T, h *Hub, key string, wake chan struct{}) *Key {
	t.Helper()
	k, err := h.Track(ctx, key, key, wake)
	if err != nil {
		t.Fatalf("Track: %v", err)
	}
	t.Cleanup(k.Close)
	return k
}

func arm(t *testing.T, k *Key) (gone bool) {
	t.Helper()
	gone, err := k.Arm(ctx)
	if err != nil {
		t.Fatalf("Arm: %v", err)
	}
	return gone
}

// commandCalls returns how many times the server has run cmd (as INFO commandstats
// names it: "pttl", "client|tracking").
func commandCalls(t *testing.T, rdb *redis.Client, cmd string) int {
	t.Helper()
	info, err := rdb.Info(ctx, "commandstats").Result()
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(info, "\n") {
		rest, ok := strings.CutPrefix(line, "cmdstat_"+cmd+":calls=")
		if ok {
			n, _ := strconv.Atoi(rest[:strings.IndexByte(rest, ',')])
			return n
		}
	}
	return 0
}

// TestTrackWakesOnWrite: an armed key wakes its waiter at the next write by another client,
// whichever write it is, with the node's client speaking RESP2 or RESP3; Arm then reads
// again and says whether the key is still there.
func TestTrackWakesOnWrite(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	writes := []struct {
		name   string
		write  func(key string) error
		exists bool // after the write
	}{
		{"DEL", func(key string) error { return rdb.Del(ctx, key).Err() }, false},
		{"UNLINK", func(key string) error { return rdb.Unlink(ctx, key).Err() }, false},
		{"compare-and-delete", func(key string) error {
			return rdb.Eval(ctx, `if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) end`, []string{key}, "v").Err()
		}, false},
		{"SET", func(key string) error { return rdb.Set(ctx, key, "other", time.Minute).Err() }, true},
		{"PEXPIRE", func(key string) error { return rdb.PExpire(ctx, key, 2*time.Minute).Err() }, true},
		{"expiry", nil, false}, // the key is set to expire soon after Arm
	}
	for _, protocol := range []int{2, 3} {
		opts := srv.Options()
		opts.Protocol = protocol
		node := redis.NewClient(opts)
		t.Cleanup(func() { _ = node.Close() })
		h := newHub(t, node)
		arm(t, track(t, h, "warm-up", make(chan struct{}, 1))) // connects
		for _, w := range writes {
			key := "k-" + w.name + "-resp" + strconv.Itoa(protocol)
			ttl := time.Minute
			if w.write == nil {
				ttl = 300 * time.Millisecond
			}
			rdb.Set(ctx, key, "v", ttl)
			wake := make(chan struct{}, 1)
			k := track(t, h, key, wake)
			if arm(t, k) {
				t.Fatalf("%s: Arm says %s is gone", w.name, key)
			}
			notWoken(t, wake, 20*time.Millisecond, w.name+": before the write")
			// An expired key is noticed by the server's active expiry, a few times a
			// second, or when it is next touched.
			if w.write != nil {
				if err := w.write(key); err != nil {
					t.Fatal(err)
				}
			}
			woken(t, wake, long, "RESP"+strconv.Itoa(protocol)+" "+w.name)
			if gone := arm(t, k); gone == w.exists {
				t.Fatalf("RESP%d %s: Arm after the write says gone=%v, want %v", protocol, w.name, gone, !w.exists)
			}
		}
	}
}

// TestTrackArm: Arm of a missing key says it is gone and registers it all the same; an
// armed key is not read again until a write is heard, and Arm then has nothing new to say.
func TestTrackArm(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	h := newHub(t, srv.Client(t))
	wake := make(chan struct{}, 1)
	k := track(t, h, "missing", wake)
	if !arm(t, k) {
		t.Fatal("Arm does not say that a missing key is gone")
	}
	for range 5 {
		if arm(t, k) {
			t.Fatal("Arm of an armed key says it is gone: nothing was read")
		}
	}
	if n := commandCalls(t, rdb, "pttl"); n != 1 {
		t.Fatalf("%d reads for six Arms with no write between them, want 1", n)
	}
	rdb.Set(ctx, "missing", "now", time.Minute)
	woken(t, wake, long, "the key was set")
	if arm(t, k) {
		t.Fatal("Arm after the SET says the key is gone")
	}
	if n := commandCalls(t, rdb, "pttl"); n != 2 {
		t.Fatalf("%d reads, want 2: Arm after a write reads again", n)
	}
}

// TestTrackACL: a user whose ACL refuses CLIENT gets ErrTrackingRefused from Arm, and
// from Track after that; CLIENT ID and CLIENT TRACKING are all that tracking needs of
// CLIENT, with the channel InvalidateChannel.
func TestTrackACL(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	admin := srv.Client(t)
	for _, acl := range []struct {
		user    string
		rules   []any
		refused bool
	}{
		{"no-client", []any{"-client"}, true},
		{"no-tracking", []any{"-client", "+client|id"}, true},
		{"no-channel", []any{"-client", "+client|id", "+client|tracking", "resetchannels", "&other"}, true},
		{"enough", []any{"-client", "+client|id", "+client|tracking", "resetchannels", "&" + InvalidateChannel}, false},
	} {
		args := append([]any{"ACL", "SETUSER", acl.user, "on", ">pw", "~*", "&*", "+@all"}, acl.rules...)
		if err := admin.Do(ctx, args...).Err(); err != nil {
			t.Fatal(err)
		}
		opts := srv.Options()
		opts.Username, opts.Password = acl.user, "pw"
		rdb := redis.NewClient(opts)
		t.Cleanup(func() { _ = rdb.Close() })
		h := newHub(t, rdb)
		wake := make(chan struct{}, 1)
		k := track(t, h, "k", wake)
		_, err := k.Arm(ctx)
		if !acl.refused {
			if err != nil {
				t.Fatalf("%s: Arm = %v", acl.user, err)
			}
			admin.Set(ctx, "k", "v", time.Minute)
			woken(t, wake, long, acl.user+": SET")
			continue
		}
		if !errors.Is(err, ErrTrackingRefused) || !strings.Contains(err.Error(), "NOPERM") {
			t.Fatalf("%s: Arm = %v, want ErrTrackingRefused with the server's NOPERM", acl.user, err)
		}
		if _, err := h.Track(ctx, "k2", "k2", make(chan struct{}, 1)); !errors.Is(err, ErrTrackingRefused) {
			t.Fatalf("%s: Track after a refusal = %v, want ErrTrackingRefused", acl.user, err)
		}
	}
}

// TestTrackReconnect: when either connection is lost, every key is woken (what the server
// tracked may be gone) and tracks again after the next Arm. The tracked connection is
// found dead by the idle ping; the pub/sub one by its reader.
func TestTrackReconnect(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	h := NewHub(srv.Client(t), newHub(t, rdb).logger)
	h.idle = 100 * time.Millisecond
	t.Cleanup(h.Close)
	wake := make(chan struct{}, 1)
	k := track(t, h, "k", wake)
	rdb.Set(ctx, "k", "v", time.Minute)
	for _, kill := range []struct {
		name   string
		filter []string
	}{
		{"pub/sub connection", []string{"TYPE", "pubsub"}},
		{"tracked connection", []string{"SKIPME", "yes", "TYPE", "normal"}},
	} {
		arm(t, k)
		if err := rdb.ClientKillByFilter(ctx, kill.filter...).Err(); err != nil {
			t.Fatal(err)
		}
		woken(t, wake, long, kill.name+" killed")
		eventually(t, long, "subscribed again", func() bool { return numSub(t, rdb, InvalidateChannel) == 1 })
		time.Sleep(100 * time.Millisecond) // the confirmation's wake-up
		drain(wake)
		eventually(t, long, "tracking again", func() bool {
			_, err := k.Arm(ctx)
			return err == nil
		})
		rdb.Del(ctx, "k")
		woken(t, wake, long, "DEL after the "+kill.name+" came back")
		rdb.Set(ctx, "k", "v", time.Minute)
		drain(wake)
	}
}

// TestTrackFlush: FLUSHALL invalidates every key at once (an invalidation with no key
// names): every waiter is woken.
func TestTrackFlush(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	h := newHub(t, srv.Client(t))
	wake := make(chan struct{}, 1)
	rdb.Set(ctx, "k", "v", time.Minute)
	k := track(t, h, "k", wake)
	arm(t, k)
	rdb.FlushAll(ctx)
	woken(t, wake, long, "FLUSHALL")
	if !arm(t, k) {
		t.Fatal("Arm after FLUSHALL does not say the key is gone")
	}
}

// TestTrackCluster: keys are tracked on the master that owns them.
func TestTrackCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	rdb := c.Client(t)
	h := newHub(t, c.Client(t))
	masters := map[string]bool{}
	for i := 0; len(masters) < 3; i++ {
		key := "k" + strconv.Itoa(i)
		m, err := rdb.MasterForKey(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		if masters[m.Options().Addr] {
			continue
		}
		masters[m.Options().Addr] = true
		rdb.Set(ctx, key, "v", time.Minute)
		wake := make(chan struct{}, 1)
		k := track(t, h, key, wake)
		if arm(t, k) {
			t.Fatalf("Arm says %s is gone", key)
		}
		rdb.Del(ctx, key)
		woken(t, wake, long, "DEL of "+key+" on "+m.Options().Addr)
	}
}

// TestTrackClose: after Close the Hub's tracking ends: Track fails with ErrClosed.
func TestTrackClose(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	h := NewHub(srv.Client(t), newHub(t, srv.Client(t)).logger)
	k, err := h.Track(ctx, "k", "k", make(chan struct{}, 1))
	if err != nil {
		t.Fatal(err)
	}
	arm(t, k)
	h.Close()
	if _, err := h.Track(ctx, "k", "k", make(chan struct{}, 1)); !errors.Is(err, ErrClosed) {
		t.Fatalf("Track after Close = %v, want ErrClosed", err)
	}
	if _, err := k.Arm(ctx); err == nil {
		t.Fatal("Arm after Close succeeded")
	}
	k.Close()
}

func drain(ch chan struct{}) {
	select {
	case <-ch:
	default:
	}
}
