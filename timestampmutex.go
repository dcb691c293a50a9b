package dlock

import (
	"context"

	"github.com/seed51c676c8/dlock/internal/engine"
)

// TimestampMutex is a mutex that speaks the oldest Redis locking recipe, the SETNX +
// GETSET timestamp protocol, so that a Go service can join a system whose other clients
// still lock that way: the key holds the holder's deadline, in unix milliseconds as a
// decimal string; a client takes a free key with SETNX; one that finds it held GETs the
// deadline and, if it has passed by its own clock, takes the key with GETSET and checks
// that the old value it got back had passed too. With WithPrefix("") the key is the bare
// name, as the other clients know it; a TimestampMutex excludes, and is excluded by,
// every client of that protocol on the same key. Use it only for that: it is unsafe, and
// Mutex is not.
//
// Why it is unsafe, whoever implements it:
//   - It trusts every client's wall clock. Deadlines are instants on the writer's clock,
//     compared with the reader's, so a client whose clock runs ahead by more than the time
//     left until the key's deadline takes the lock from a live holder: with dlock renewing
//     every third of the TTL, that is as little as two thirds of the TTL just before a
//     renewal, and less while renewals fail. One whose clock lags writes deadlines that
//     others take as passed. Every other kind of dlock lock times its keys with Redis's
//     clock; this one cannot, because the protocol's other clients read their own.
//   - The holder's own wall clock stepped back by more than twice the TTL can end its
//     lease as lost: its new deadlines are then below the one in the key, which renewals
//     keep, and the hold forgets that one after two TTLs on its monotonic clock.
//   - The key holds no owner: the deadline is the holder's only mark. Two clients can
//     write the same deadline (the same millisecond, or clocks and lease lengths that add
//     up to it), and each then takes the other's lock for its own: dlock would renew it or
//     delete it on Unlock. The holds of one dlock Client are kept apart (a deadline
//     another of its holds owns is moved a millisecond on); those of other processes
//     cannot be.
//   - A stale client can extend another's lock in the GETSET race: when two clients see
//     the same passed deadline, the loser's GETSET still overwrites the winner's deadline
//     with its own before it learns it lost. That deadline may be later or sooner than the
//     winner's (another lease length, another clock), so the lock may be taken while the
//     winner still holds it. When dlock is the winner, its lease sees its deadline gone at
//     its next renewal, a third of the TTL later at most, and is lost (ErrLost); not
//     sooner.
//
// Migrate to Mutex as soon as every client of the key is dlock or a Redlock client (SET NX
// PX with a random token, compare-and-delete): its key's owner is a random token and its
// times are Redis's. Until then, give every client the same lease length and keep their
// clocks synchronized, and have the protected storage check Lease.Token (fencing tokens
// still grow: they come from a counter that only dlock uses).
//
// What dlock does with the protocol: it takes the lock in one script (SETNX, GET, compare,
// and the GETSET step at once), so dlock's clients never race each other; it computes
// deadlines from the client's wall clock, ValidUntil from its monotonic clock as for any
// lease; it renews by rewriting the deadline, only while the key holds a deadline it
// wrote, and Unlock deletes the key only then. It also gives the key an expiry of the TTL,
// which the recipe does not: the key goes no sooner than the deadline by the holder's
// clock, so the holder loses nothing, and the key of a dlock holder that crashed, or the
// far deadline of one whose clock runs fast, is gone after one TTL. The fencing counter
// is the companion key {name}:fence (with the Client's prefix before name), as for a
// Mutex.
//
// A waiter wakes when a dlock holder unlocks and when the holder's deadline passes by its
// own clock; the other clients release with a plain DEL (or take over with GETSET) and
// tell no one, so a waiter tracks the key as a Mutex's waiter does (CLIENT TRACKING, or a
// re-check at most every 100ms where the server refuses it). Goroutines of one process queue locally
// and only the first asks Redis. A TimestampMutex needs one Redis deployment: on a quorum
// Client every method returns an error, since votes for a deadline cannot be counted as
// one holder's. Inspect reports its lock as a mutex whose holder token is the deadline.
type TimestampMutex struct {
	m *engine.TimestampMutex
}

// TimestampMutex returns the timestamp-protocol mutex called name. An empty name or an
// invalid option is reported by every method of the returned TimestampMutex. Do not use
// the same name for another kind of lock.
func (c *Client) TimestampMutex(name string, opts ...LockOption) *TimestampMutex {
	cfg, err := newLockConfig(opts)
	return &TimestampMutex{m: engine.NewTimestampMutex(c.e, name, cfg, err)}
}

// Lock acquires the lock, waiting until it is free or its holder's deadline has passed by
// this client's clock, or until ctx is done. Re-entry by context, the meaning of ctx and
// the errors are as for Mutex.Lock. If the key holds something that is not a unix-ms
// deadline, Lock returns at once an error that wraps ErrNotTimestamp and quotes it; the
// key is left as it is.
func (m *TimestampMutex) Lock(ctx context.Context) (*Lease, error) {
	return handle(m.m.Lock(ctx, false))
}

// TryLock makes one attempt to acquire the lock and returns an error wrapping
// ErrNotAcquired if it is held. Re-entry works as for Lock.
func (m *TimestampMutex) TryLock(ctx context.Context) (*Lease, error) {
	return handle(m.m.Lock(ctx, true))
}

// Do runs fn while holding the lock, like Mutex.Do.
func (m *TimestampMutex) Do(ctx context.Context, fn func(ctx context.Context) error) error {
	lease, err := m.Lock(ctx)
	if err != nil {
		return err
	}
	return run(ctx, lease, fn)
}
