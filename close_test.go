package dlock_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
)

// TestCloseEndsEveryCall: on every deployment, each call a Close ends says ErrClosed, with
// one "dlock: " in its text: the waits of a Mutex, of a Mutex's Do, of a MultiMutex and of
// a campaign, and every call made after Close; an Observe channel closes.
func TestCloseEndsEveryCall(t *testing.T) {
	onDeployments(t, func(t *testing.T, d deployment) {
		ctx := ctxTimeout(t, 20*time.Second)
		holder := d.client()
		mustLock(t, holder.Mutex("m"), ctx)
		mustLock(t, holder.Mutex("mb"), ctx)
		if _, err := holder.Election("e").Campaign(ctx, "holder"); err != nil {
			t.Fatal(err)
		}
		if _, err := holder.Semaphore("s", 1).Acquire(ctx, 1); err != nil {
			t.Fatal(err)
		}
		if _, err := holder.RWMutex("rw").Lock(ctx); err != nil {
			t.Fatal(err)
		}

		c := d.client()
		observed := c.Election("e").Observe(ctx)
		next(t, observed, 5*time.Second) // the holder's term
		errs := waitAll(map[string]func() error{
			"Mutex.Lock":        func() error { _, err := c.Mutex("m").Lock(ctx); return err },
			"Mutex.Do":          func() error { return c.Mutex("m").Do(ctx, func(context.Context) error { return nil }) },
			"MultiMutex.Lock":   func() error { _, err := c.MultiMutex([]string{"ma", "mb"}).Lock(ctx); return err },
			"Election.Campaign": func() error { _, err := c.Election("e").Campaign(ctx, "c"); return err },
			"Election.Run":      func() error { return c.Election("e").Run(ctx, "c", func(context.Context) error { return nil }) },
			"Semaphore.Acquire": func() error { _, err := c.Semaphore("s", 1).Acquire(ctx, 1); return err },
			"RWMutex.RLock":     func() error { _, err := c.RWMutex("rw").RLock(ctx); return err },
		}, func() {
			time.Sleep(200 * time.Millisecond) // every wait has begun
			if err := c.Close(); err != nil {
				t.Fatal(err)
			}
		})
		after := map[string]func() error{
			"Mutex.TryLock":        func() error { _, err := c.Mutex("x").TryLock(ctx); return err },
			"MultiMutex.TryLock":   func() error { _, err := c.MultiMutex([]string{"xa", "xb"}).TryLock(ctx); return err },
			"Election.TryCampaign": func() error { _, err := c.Election("x").TryCampaign(ctx, "c"); return err },
			"Election.Leader":      func() error { _, err := c.Election("e").Leader(ctx); return err },
		}
		for what, call := range after {
			errs[what+" after Close"] = call()
		}
		for what, err := range errs {
			if !errors.Is(err, dlock.ErrClosed) {
				t.Errorf("%s = %v, want ErrClosed", what, err)
				continue
			}
			onePrefix(t, what, err)
		}
		waitObserveClosed(t, observed)
	})
}

// waitAll starts every call, runs end, and returns each call's error.
func waitAll(calls map[string]func() error, end func()) map[string]error {
	chans := make(map[string]chan error, len(calls))
	for what, call := range calls {
		ch := make(chan error, 1)
		chans[what] = ch
		go func() { ch <- call() }()
	}
	end()
	errs := make(map[string]error, len(calls))
	for what, ch := range chans {
		errs[what] = <-ch
	}
	return errs
}

// waitObserveClosed drains ch until it closes, within 5 s.
func waitObserveClosed(t *testing.T, ch <-chan dlock.Leader) {
	t.Helper()
	deadline := time.After(5 * time.Second)
	for {
		select {
		case _, ok := <-ch:
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("Observe's channel still open 5 s after Close")
		}
	}
}
