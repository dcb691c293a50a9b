package faults

import (
	"cmp"
	"context"
	"errors"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
)

// errNotGuardable: the lease is not a *dlock.Lease.
var errNotGuardable = errors.New("the lease has no Guard")

// guard makes one guarded write under lease cmd.ID, without looking at the lease first:
// it appends "proc:id" to a list beside the lock in one Lease.Guard, bounded by cmd.Wait.
// The guard-plain mutation appends with a plain RPUSH instead.
func (a *agent) guard(cmd command) {
	h, err := a.lease(cmd)
	if err != nil {
		a.fail(cmd, err)
		return
	}
	l, ok := h.l.(*dlock.Lease)
	if !ok {
		a.fail(cmd, errNotGuardable)
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), cmp.Or(cmd.Wait, opTimeout))
	defer cancel()
	key, entry := l.Key("guarded"), a.cfg.Name+":"+cmd.ID
	at := time.Now().UnixNano()
	if a.cfg.Mutation == mutGuardPlain {
		err = a.nodes[0].RPush(ctx, key, entry).Err()
	} else {
		_, err = l.Guard(ctx, func(p redis.Pipeliner) error { p.RPush(ctx, key, entry); return nil })
	}
	e := event{Ev: evWrote, ID: cmd.ID, Op: cmd.Op, Name: key, Token: l.Token(), At: at, OK: err == nil}
	if err != nil {
		e.Err, e.Kind = err.Error(), kindOf(err)
	}
	a.emit(e)
}
