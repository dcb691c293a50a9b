package dlock_test

import (
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
)

// runReturns runs e.Run with ctx and value and requires that it returns, within a second
// (far below the ctx's end, which would also end it), an error that ok accepts, without
// running fn.
func runReturns(t *testing.T, ctx context.Context, e *dlock.Election, value, what string, ok func(error) bool) {
	t.Helper()
	start := time.Now()
	err := e.Run(ctx, value, func(context.Context) error {
		t.Errorf("%s: fn ran", what)
		return nil
	})
	if took := time.Since(start); err == nil || !ok(err) || took > time.Second {
		t.Fatalf("%s: Run = %v after %v, want its error at once", what, err, took)
	}
	t.Logf("%s: %v", what, err)
}

func wrongType(err error) bool { return strings.Contains(err.Error(), "WRONGTYPE") }

// TestRunReturnsWhatRetryingCannotMend: Run returns the errors that campaigning again
// cannot mend at once, rather than campaigning with backoff until ctx ends: a value too
// long, a lock key or a record that holds another type of value (on every node of a
// quorum too), a ctx carrying a lease the campaign would wait for, a closed Client.
func TestRunReturnsWhatRetryingCannotMend(t *testing.T) {
	t.Parallel()
	onDeployments(t, func(t *testing.T, d deployment) {
		ctx := ctxTimeout(t, 30*time.Second)
		c := d.client()
		bg := context.Background()
		e := c.Election("perm", dlock.TTL(time.Second))

		runReturns(t, ctx, e, strings.Repeat("v", dlock.MaxValueLen+1), "a value too long", func(error) bool { return true })

		for _, key := range []string{"dlock:perm", "{dlock:perm}:leader"} {
			for _, n := range d.nodes {
				if err := n.LPush(bg, key, "another program's").Err(); err != nil {
					t.Fatal(err)
				}
			}
			runReturns(t, ctx, e, "v", key+" a list", wrongType)
			d.del(t, key)
		}

		lease, err := c.Mutex("perm").Lock(ctx)
		if err != nil {
			t.Fatal(err)
		}
		runReturns(t, lease.Context(), e, "v", "ctx carrying a Mutex lease on the lock", func(err error) bool {
			return strings.Contains(err.Error(), "would wait for itself")
		})
		_ = lease.Unlock(ctx)

		closed := d.client()
		_ = closed.Close()
		runReturns(t, ctx, closed.Election("perm"), "v", "a closed Client", func(err error) bool { return errors.Is(err, dlock.ErrClosed) })
	})
}

// TestRunRidesOutAnOutage: a campaign that failed because the server is down is logged
// and tried again with backoff, and Run leads once the server is back.
func TestRunRidesOutAnOutage(t *testing.T) {
	t.Parallel()
	srv, rdb := standalone(t)
	ctx := ctxTimeout(t, 60*time.Second)
	var log syncBuffer
	c := newClient(t, rdb, dlock.WithLogger(slog.New(slog.NewTextHandler(&log, nil))))
	srv.Kill(t)
	errDone := errors.New("done")
	ran := make(chan error, 1)
	go func() {
		ran <- c.Election("outage", dlock.TTL(time.Second)).Run(ctx, "v", func(context.Context) error { return errDone })
	}()
	for !strings.Contains(log.String(), "campaign failed; trying again") {
		select {
		case err := <-ran:
			t.Fatalf("Run returned %v while the server was down, want it to keep campaigning", err)
		case <-ctx.Done():
			t.Fatal("no failed campaign was logged while the server was down")
		case <-time.After(50 * time.Millisecond):
		}
	}
	srv.Restart(t)
	if err := <-ran; !errors.Is(err, errDone) {
		t.Fatalf("Run after the server came back = %v, want fn's errDone", err)
	}
}
