package dlocktest_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/dlocktest"
)

func ExampleServer() {
	client := dlocktest.Server(t) // t: your test's *testing.T
	ctx := context.Background()

	lease, err := client.Mutex("report").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Unlock(ctx)
	fmt.Println("held with fencing token", lease.Token())
	// Output: held with fencing token 1
}

func ExampleStart() {
	srv := dlocktest.Start(t)
	alice, bob := srv.NewClient(), srv.NewClient() // two processes, say
	ctx := context.Background()

	lease, err := alice.Mutex("cron", dlock.TTL(time.Second)).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	_, err = bob.Mutex("cron").TryLock(ctx)
	fmt.Println("bob while alice holds it:", errors.Is(err, dlock.ErrNotAcquired))

	srv.Kill() // alice cannot renew, and loses the lease
	dlocktest.AssertLost(t, lease, 5*time.Second)
	srv.Restart()
	lease, err = bob.Mutex("cron").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer lease.Unlock(ctx)
	fmt.Println("bob after the restart: token", lease.Token())
	// Output:
	// bob while alice holds it: true
	// bob after the restart: token 1
}

func ExampleEmbedded() {
	client := dlocktest.Embedded(t) // no redis-server needed
	ctx := context.Background()

	lease, err := client.Mutex("cache:user:42", dlock.TTL(100*time.Millisecond), dlock.NoRenew()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-lease.Done() // keys expire in step with the clock
	fmt.Println(lease.Err())
	// Output: dlock: lease lost
}

func ExampleWaitLost() {
	srv := dlocktest.Start(t)
	client := srv.NewClient()

	lease, err := client.Mutex("nightly", dlock.TTL(300*time.Millisecond)).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv.Flush() // the key is gone: the next renewal finds it so
	fmt.Println(dlocktest.WaitLost(lease, 5*time.Second))
	// Output: <nil>
}

func ExampleAssertLost() {
	srv := dlocktest.Start(t)
	client := srv.NewClient()

	lease, err := client.Mutex("nightly", dlock.TTL(300*time.Millisecond)).Lock(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	srv.Pause() // a hung server: renewals go unanswered until the lease runs out
	defer srv.Resume()
	dlocktest.AssertLost(t, lease, 5*time.Second) // or the test fails here
	fmt.Println("lost before", lease.ValidUntil().Before(time.Now()))
	// Output: lost before true
}

// report is code under test: it writes the report under its lock, through save.
type report struct {
	mu   *dlock.Mutex
	save func(text string)
}

func (r *report) run(ctx context.Context) error {
	return r.mu.Do(ctx, func(ctx context.Context) error {
		r.save("done")
		return nil
	})
}

func ExampleRanUnderLock() {
	client := dlocktest.Server(t)
	var saved []string
	r := &report{mu: client.Mutex("report")}
	r.save = func(text string) { // the test's fake storage
		dlocktest.RanUnderLock(t, client.Mutex("report"), func() {
			saved = append(saved, text)
		})
	}

	if err := r.run(context.Background()); err != nil {
		t.Fatal(err)
	}
	fmt.Println(saved) // and had it run without the lock, the test would have failed
	// Output: [done]
}

func ExampleFencedStore() {
	client := dlocktest.Embedded(t)
	ctx := context.Background()
	var store dlocktest.FencedStore[int]

	// A holder that pauses past its lease...
	stale, err := client.Mutex("stock", dlock.TTL(100*time.Millisecond), dlock.NoRenew()).Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	<-stale.Done()
	// ...while the next one takes the lock and writes.
	fresh, err := client.Mutex("stock").Lock(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer fresh.Unlock(ctx)
	fmt.Println(store.Put("stock", 9, fresh.Token()))

	err = store.Put("stock", 10, stale.Token()) // the first wakes and writes
	fmt.Println(errors.Is(err, dlocktest.ErrStaleToken))
	fmt.Println(store.Get("stock"))
	// Output:
	// <nil>
	// true
	// 9 true
}
