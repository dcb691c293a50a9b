package dlock_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// TestTimestampMutexResentAttemptAcquires: a TimestampMutex attempt whose first copy took
// the key but whose reply came too late (past the go-redis read timeout) is resent by
// go-redis on a new connection; the resend finds the key holding the attempt's own
// deadline, its id a tombstone, and acquires. So TryLock and Lock return a lease within a
// few seconds, with the fencing token the first copy took, rather than a refusal that
// would leave the lock taken by no one for a TTL; and Unlock leaves no key behind.
func TestTimestampMutexResentAttemptAcquires(t *testing.T) {
	for _, tt := range []struct {
		name string
		lock func(*dlock.TimestampMutex, context.Context) (*dlock.Lease, error)
	}{
		{"TryLock", (*dlock.TimestampMutex).TryLock},
		{"Lock", (*dlock.TimestampMutex).Lock},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv, rdb := standalone(t)
			a := newLateProcessRT(t, srv, 200*time.Millisecond, dlock.WithPrefix(""))
			ctx := ctxTimeout(t, 20*time.Second)
			name := "stamp-resent-" + tt.name // the key, with no prefix
			fence := "{" + name + "}:fence"

			a.proxy.DelayReplies(time.Second) // past the 200ms read timeout
			calls := scriptCalls(t, rdb)
			replies := a.proxy.Replies()
			start := time.Now()
			var lease *dlock.Lease
			done := make(chan error, 1)
			go func() {
				var err error
				lease, err = tt.lock(a.TimestampMutex(name), ctx)
				done <- err
			}()
			waitUntil(t, 10*time.Second, "the first copy took the key and its reply is held", func() bool {
				return rdb.Exists(context.Background(), name).Val() == 1 && a.proxy.Replies() > replies
			})
			a.proxy.DelayReplies(0)
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("%s whose first copy took the key: %v (after %v)", tt.name, err, time.Since(start).Round(time.Millisecond))
				}
			case <-time.After(5 * time.Second):
				t.Fatalf("%s whose first copy took the key did not return within 5s", tt.name)
			}
			t.Logf("%s acquired after %v", tt.name, time.Since(start).Round(time.Millisecond))
			if n := scriptCalls(t, rdb) - calls; n < 2 {
				t.Fatalf("%d script calls ran for the attempt, want its first copy and a resend: the setup missed", n)
			}
			if got, want := lease.Token(), uint64(1); got != want {
				t.Errorf("fencing token %d, want %d: the first copy's, not raised again by the resend", got, want)
			}
			if v := rdb.Get(ctx, fence).Val(); v != "1" {
				t.Errorf("the fencing counter is %q, want \"1\": the resend wrote it", v)
			}
			if err := lease.Unlock(ctx); err != nil {
				t.Fatalf("Unlock: %v", err)
			}
			time.Sleep(300 * time.Millisecond) // any reply or copy still under way comes in
			if v, err := rdb.Get(ctx, name).Result(); err != redis.Nil {
				t.Fatalf("after Unlock the key holds %q (PTTL %v, %v), want it gone", v, rdb.PTTL(ctx, name).Val(), err)
			}
		})
	}
}

// TestTimestampMutexSameTTLClientsNeverRefuseFreeLock: two Clients with the same TTL take
// turns on one free name, TryLock then Unlock, as fast as they can, so that one often
// writes the deadline the other just wrote (the same millisecond). An attempt's tombstone
// is named after its own id, not its deadline, so neither is ever refused the free lock.
func TestTimestampMutexSameTTLClientsNeverRefuseFreeLock(t *testing.T) {
	_, rdb := standalone(t)
	ctx := ctxTimeout(t, 60*time.Second)
	const rounds = 200
	const ttl = 10 * time.Second
	ms := []*dlock.TimestampMutex{
		newClient(t, rdb).TimestampMutex("stamp-alternate", dlock.TTL(ttl)),
		newClient(t, rdb).TimestampMutex("stamp-alternate", dlock.TTL(ttl)),
	}
	var refused, same int
	var first error
	var last int64
	for i := range rounds {
		l, err := ms[i%2].TryLock(ctx)
		if err != nil {
			if !errors.Is(err, dlock.ErrNotAcquired) {
				t.Fatalf("round %d: TryLock: %v", i, err)
			}
			if refused++; first == nil {
				first = fmt.Errorf("round %d, client %d: %w", i, i%2, err)
			}
			continue
		}
		d, _ := rdb.Get(ctx, "dlock:stamp-alternate").Int64()
		if d == last {
			same++
		}
		last = d
		if err := l.Unlock(ctx); err != nil {
			t.Fatalf("round %d: Unlock: %v", i, err)
		}
	}
	t.Logf("%d rounds, %d refused, %d wrote the deadline the other client had just written", rounds, refused, same)
	if refused > 0 {
		t.Errorf("%d of %d TryLocks of the free lock were refused; the first: %v", refused, rounds, first)
	}
	if n := rdb.Exists(ctx, "dlock:stamp-alternate").Val(); n != 0 {
		t.Errorf("after the last Unlock the key exists")
	}
	if refused == 0 && same == 0 {
		t.Skipf("no round wrote the deadline the other client had just written: the test showed nothing")
	}
}
