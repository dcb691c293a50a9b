package engine

import (
	"context"
	"strconv"

	"github.com/seed51c676c8/dlock/internal/batch"
)

// Fencing tokens on a quorum: each node keeps its own counter, and an acquisition settles
// on the largest a node of its majority granted. The nodes behind it are raised
// (fence_raise.lua, which only raises): those that granted in time before the lock is
// granted (settleFence), those that grant late as their replies come (poll.go).

// settleFence makes sure a majority holds at least fence before the lock is granted: the
// nodes that granted with a smaller counter are raised to it (and those that grant after
// the verdict as their replies come: hearLate). Any later majority overlaps this one, so
// its INCR starts from fence or above: tokens keep growing across majorities.
func settleFence(ctx context.Context, t *Target, fences []int64, fence int64) bool {
	c := t.c
	need := t.scheme.need(len(c.nodes))
	have := 0
	var low []int
	for i, f := range fences {
		switch {
		case f == fence:
			have++
		case f > 0:
			low = append(low, i)
		}
	}
	arg := strconv.FormatInt(fence, 10)
	if have >= need {
		// Raise the laggards anyway, without waiting: nodes that stay in step make the
		// synchronous raise below rare.
		raiseAbandoned(t, low, arg)
		return true
	}
	v := poll(ctx, c, t.parts[:1], low, t.cfg.TTL,
		func(p *Target, call *batch.Call) { prepareRaise(t, arg, call) },
		func(v *votes) bool { return have+v.yes >= need })
	return have+v.yes >= need
}

// raiserFor returns the raiser of an acquisition of t that settled on fence; the zero
// raiser, which raises nothing, when there is nothing to raise: no fence, or one
// deployment.
func raiserFor(t *Target, fence int64) raiser {
	if fence <= 0 || len(t.c.nodes) == 1 {
		return raiser{}
	}
	return raiser{t, fence}
}
