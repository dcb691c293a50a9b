package dlock_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
)

// TestInteropClientNotStarved: with WithPrefix("") a dlock Mutex shares its key with
// Redlock clients of other languages (SET NX PX, compare-and-delete). Were it to take
// turns, a release that finds another dlock process waiting would never free the key (it
// sets it to the grantee's token), and a foreign client that polls with SET NX would never
// see it free while two dlock processes alternate. Bare keys therefore take no turns.
func TestInteropClientNotStarved(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 20*time.Second)
	a, b := newClient(t, rdb, dlock.WithPrefix("")), newClient(t, rdb, dlock.WithPrefix(""))

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for _, c := range []*dlock.Client{a, b} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			m := c.Mutex("shared")
			for {
				select {
				case <-stop:
					return
				default:
				}
				l, err := m.Lock(ctx)
				if err != nil {
					return
				}
				time.Sleep(5 * time.Millisecond) // the work
				_ = l.Unlock(ctx)
			}
		}()
	}

	// A foreign client: SET NX PX every 2ms for 2 seconds.
	got := false
	deadline := time.Now().Add(2 * time.Second)
	tries := 0
	for time.Now().Before(deadline) {
		tries++
		if ok, _ := rdb.SetNX(context.Background(), "shared", "foreign", time.Second).Result(); ok {
			got = true
			rdb.Del(context.Background(), "shared")
			break
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if !got {
		t.Errorf("a SET NX client never got the shared key in %d tries over 2s while two dlock processes alternated (5ms holds)", tries)
	}
}
