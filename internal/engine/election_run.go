package engine

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Run campaigns for value and runs fn while leading, until fn returns while its term still
// leads (its error is returned, after the term resigned) or ctx ends. fn's ctx is the
// term's context, cancelled also when ctx ends. After a loss, or a campaign that failed on
// the nodes, it campaigns again with backoff; the loss, and fn's error then, are logged. A
// campaign's error that retrying cannot help (permanent: the server's answer about the
// data or the rights, a refused call) or Close's is returned at once, no term held.
func (e *Election) Run(ctx context.Context, value string, fn func(ctx context.Context) error) error {
	if err := checkValue(e.t, value); err != nil {
		return err
	}
	log := e.t.c.cfg.Logger
	for failures := 0; ; failures++ {
		term, err := e.Campaign(ctx, value, false)
		if err != nil {
			if ctx.Err() != nil || e.t.c.Usable() != nil || permanent(err) { // Close: Usable says ErrClosed
				return err
			}
			log.Warn("dlock: campaign failed; trying again", "name", e.t.name, "err", err)
		} else {
			began := time.Now()
			leading, fnErr := e.lead(ctx, term, fn)
			if leading {
				return errors.Join(fnErr, e.resign(ctx, term))
			}
			log.Warn("dlock: the term ended while leading; campaigning again", "name", e.t.name, "token", term.Token(), "err", fnErr)
			if time.Since(began) > e.t.cfg.TTL {
				failures = 0 // a term that lasted: this loss is not one of a series
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("dlock: run %q: %w", e.t.name, ctx.Err())
		case <-time.After(backoff(failures)):
		}
	}
}

// lead runs fn with term's context, also cancelled when ctx ends, and reports whether the
// term still led when fn returned.
func (e *Election) lead(ctx context.Context, term *Term, fn func(ctx context.Context) error) (leading bool, err error) {
	fnCtx, cancel := context.WithCancelCause(term.Context())
	defer cancel(nil)
	stop := context.AfterFunc(ctx, func() { cancel(context.Cause(ctx)) })
	defer stop()
	err = fn(fnCtx)
	return term.Err() == nil, err
}

// resign ends term after fn returned, within UnlockTimeout even if ctx has ended.
func (e *Election) resign(ctx context.Context, term *Term) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), UnlockTimeout)
	defer cancel()
	return term.Unlock(ctx)
}
