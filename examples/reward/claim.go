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

// verifyTime is how long a claim takes between its check and its insert: the window in
// which, without a lock, the other members pass the same check.
const verifyTime = 50 * time.Millisecond

// claimAll lets members members of every family claim at the same moment and returns the
// claims recorded per family.
func claimAll(ctx context.Context, st *store, srv *exredis.Server, families []string, members int, withLock bool) (map[string]int, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute) // the example never hangs
	defer cancel()
	if err := st.reset(ctx); err != nil {
		return nil, err
	}
	start := make(chan struct{})
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []error
	for _, family := range families {
		for m := range members {
			member := fmt.Sprintf("%s/member-%d", family, m+1)
			rdb := srv.NewClient()
			client := dlock.New(rdb)
			wg.Go(func() {
				defer rdb.Close()
				defer client.Close()
				<-start
				var err error
				if withLock {
					err = client.Mutex("example:reward:family:"+family).Do(ctx, func(ctx context.Context) error {
						_, err := claim(ctx, st, family, member)
						return err
					})
				} else {
					_, err = claim(ctx, st, family, member)
				}
				if err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("%s: %w", member, err))
					mu.Unlock()
				}
			})
		}
	}
	close(start)
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return st.claimsPerFamily(ctx)
}

// claim claims the family's reward for member, unless the family has claimed it already.
// It reports whether it did.
func claim(ctx context.Context, st *store, family, member string) (bool, error) {
	n, err := st.claims(ctx, family)
	if err != nil || n > 0 {
		return false, err // already claimed
	}
	time.Sleep(verifyTime) // the rewards service verifies the family
	return true, st.insertClaim(ctx, family, member)
}
