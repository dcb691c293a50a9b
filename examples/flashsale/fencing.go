package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/examples/internal/exredis"
)

// staleTTL is the lease of the buyer that will pause: short, and not renewed, so that it
// runs out during the pause.
const staleTTL = 100 * time.Millisecond

// fenceResult is what happened when a holder paused past its lease.
type fenceResult struct {
	tokenA, tokenB uint64        // the fencing tokens of buyers A and B
	stockA, stockB int           // the stock each of them read
	pause          time.Duration // how long A was paused
	errA           error         // what A's lease said when A resumed
	wroteA, wroteB bool          // whether the database accepted their writes
	lastToken      uint64        // the row's last_token after both writes
	unfencedRows   int64         // rows A's write would have changed without the token check
	sold, left     int           // orders and stock at the end
}

// fencing shows a holder that is paused past its lease. Buyer A locks with a short
// lease that is not renewed and reads the stock; then A's process stops (think of a long
// garbage-collection pause, or a stopped VM). Its lease runs out, buyer B takes the lock
// and sells one item. A resumes and, still believing it holds the lock, writes: the
// fenced UPDATE refuses A's smaller token.
func fencing(ctx context.Context, st *store, srv *exredis.Server, stock int) (fenceResult, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var r fenceResult
	if err := st.reset(ctx, stock); err != nil {
		return r, fmt.Errorf("reset the stock: %w", err)
	}
	rdbA, rdbB := srv.NewClient(), srv.NewClient()
	defer rdbA.Close()
	defer rdbB.Close()
	clientA, clientB := dlock.New(rdbA), dlock.New(rdbB)
	defer clientA.Close()
	defer clientB.Close()

	leaseA, err := clientA.Mutex(lockName, dlock.TTL(staleTTL), dlock.NoRenew()).Lock(ctx)
	if err != nil {
		return r, fmt.Errorf("buyer A: %w", err)
	}
	r.tokenA = leaseA.Token()
	if r.stockA, err = st.readStock(ctx); err != nil {
		return r, err
	}
	paused := time.Now()

	// While A is paused, B buys.
	bDone := make(chan error, 1)
	go func() {
		bDone <- func() error {
			leaseB, err := clientB.Mutex(lockName).Lock(ctx) // waits until A's lease runs out
			if err != nil {
				return fmt.Errorf("buyer B: %w", err)
			}
			defer leaseB.Unlock(context.WithoutCancel(ctx))
			r.tokenB = leaseB.Token()
			if r.stockB, err = st.readStock(leaseB.Context()); err != nil {
				return err
			}
			time.Sleep(paymentTime)
			r.wroteB, err = st.sellFenced(leaseB.Context(), "buyer B", r.tokenB)
			return err
		}()
	}()
	// A's pause lasts until its lease has run out and B has written: the order of events
	// that fencing is for.
	<-leaseA.Done()
	if err := <-bDone; err != nil {
		return r, err
	}
	r.pause = time.Since(paused)

	// A resumes where it stopped: it has paid, and it writes. (Checking leaseA.Err() first
	// would not help: the pause can come between the check and the write.)
	r.errA = leaseA.Err()
	if r.wroteA, err = st.sellFenced(ctx, "buyer A", r.tokenA); err != nil {
		return r, err
	}
	if r.unfencedRows, err = st.unfencedWouldWrite(ctx); err != nil {
		return r, err
	}
	if err := leaseA.Unlock(ctx); err != nil && !errors.Is(err, dlock.ErrNotHeld) {
		return r, err
	}
	if r.lastToken, err = st.lastToken(ctx); err != nil {
		return r, err
	}
	r.sold, r.left, err = st.totals(ctx)
	return r, err
}
