package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/examples/internal/exredis"
)

// paymentTime is how long a buyer takes to pay, between reading the stock and writing it:
// the window in which, without a lock, other buyers read the same stock.
const paymentTime = 5 * time.Millisecond

// lockName is the lock that guards the product's stock.
var lockName = fmt.Sprintf("example:flashsale:product:%d", productID)

// saleResult is what a sale did.
type saleResult struct {
	sold int // orders recorded
	left int // stock at the end
}

// sale puts stock items on sale and lets buyers buy until they see none left. Each buyer
// is a separate service: its own Redis connections and its own dlock Client. With
// withLock, each purchase (read the stock, pay, write it) runs under the product's lock.
func sale(ctx context.Context, st *store, srv *exredis.Server, buyers, stock int, withLock bool) (saleResult, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute) // the example never hangs
	defer cancel()
	if err := st.reset(ctx, stock); err != nil {
		return saleResult{}, fmt.Errorf("reset the stock: %w", err)
	}
	start := make(chan struct{})
	errs := make([]error, buyers)
	var wg sync.WaitGroup
	for i := range buyers {
		buyer := fmt.Sprintf("buyer-%d", i+1)
		rdb := srv.NewClient()
		client := dlock.New(rdb)
		mutex := client.Mutex(lockName)
		wg.Go(func() {
			defer rdb.Close()
			defer client.Close()
			<-start // everyone at once: the sale opens
			for {
				var bought bool
				var err error
				if withLock {
					err = mutex.Do(ctx, func(ctx context.Context) error {
						bought, err = buy(ctx, st, buyer)
						return err
					})
				} else {
					bought, err = buy(ctx, st, buyer)
				}
				if err != nil {
					errs[i] = fmt.Errorf("%s: %w", buyer, err)
					return
				}
				if !bought {
					return // sold out, as far as this buyer can tell
				}
			}
		})
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return saleResult{}, err
	}
	sold, left, err := st.totals(ctx)
	return saleResult{sold: sold, left: left}, err
}

// buy is one purchase: read the stock; if there is some, pay, then take one item.
func buy(ctx context.Context, st *store, buyer string) (bool, error) {
	stock, err := st.readStock(ctx)
	if err != nil || stock <= 0 {
		return false, err
	}
	time.Sleep(paymentTime) // the payment provider answers
	return true, st.sell(ctx, buyer)
}
