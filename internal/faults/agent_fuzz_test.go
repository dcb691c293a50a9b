package faults

import (
	"cmp"
	"context"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"time"

	"github.com/seed51c676c8/dlock"
)

// Classes of bad input, and what each must get.
const (
	badInvalid   = "invalid"    // an argument dlock documents as invalid: an error, at once, no lease
	badWrongType = "wrong-type" // a key of the wrong type where dlock keeps its state: an error, at once
	badOdd       = "odd"        // a strange but valid name: a lease, and a clean Unlock
	badBraces    = "braces"     // a name with a '}' outside a hash tag: a lease, or an error at once
	badEdge      = "edge"       // an extreme but valid value: any outcome, bounded, no panic
)

// Bounds on "at once".
const (
	invalidBound   = 50 * time.Millisecond // no round trip at all
	wrongTypeBound = time.Second           // one round trip, on a loaded machine
)

// badCall is one call with bad input.
type badCall struct {
	class string
	desc  string
	key   string // wrong-type: the planted key, which the clobber mutation deletes
	call  func(ctx context.Context) (holding, error)
}

// fuzz makes cmd.N random calls with bad input (seeded by cmd.Seed) and reports each as
// evBad: Op says what was called, Name the class, OK whether the outcome is what the class
// must get, Err the error or panic, Dur how long it took. cmd.Names are the planted keys,
// as "kind:name:key".
func (a *agent) fuzz(cmd command) {
	rng := rand.New(rand.NewPCG(uint64(cmd.Seed), 0))
	for i := range cmd.N {
		c := a.badCallAt(rng, int(i), cmd.Names)
		ok, errText, dur := a.runBad(c)
		a.emit(event{Ev: evBad, Op: c.desc, Name: c.class, OK: ok, Err: errText, Dur: int64(dur)})
	}
	a.emit(event{Ev: evDone, ID: cmd.ID, Op: cmd.Op})
}

// runBad makes the call, recovering a panic, and judges the outcome by its class.
func (a *agent) runBad(c badCall) (ok bool, errText string, dur time.Duration) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	start := time.Now()
	l, panicked, err := call(ctx, c.call)
	if err != nil && c.class == badWrongType && a.cfg.Mutation == mutClobber {
		_ = a.nodes[0].Del(ctx, c.key).Err() // "repair" the foreign key and try again
		l, panicked, err = call(ctx, c.call)
	}
	dur = time.Since(start)
	if err != nil {
		errText = err.Error()
	}
	if panicked != "" {
		return false, "panic: " + panicked, dur
	}
	unlocked := l == nil || l.Unlock(ctx) == nil
	switch c.class {
	case badInvalid:
		ok = err != nil && l == nil && dur <= invalidBound
	case badWrongType:
		ok = err != nil && l == nil && dur <= wrongTypeBound
	case badOdd:
		ok = err == nil && l != nil && unlocked
	case badBraces:
		ok = err == nil && l != nil && unlocked || err != nil && l == nil && dur <= invalidBound
	default:
		ok = ctx.Err() == nil && unlocked
	}
	return ok, errText, dur
}

// call runs f, turning a panic into its message.
func call(ctx context.Context, f func(ctx context.Context) (holding, error)) (l holding, panicked string, err error) {
	defer func() {
		if p := recover(); p != nil {
			panicked = fmt.Sprint(p)
		}
	}()
	l, err = f(ctx)
	return l, "", err
}

// badCallAt draws the i-th call.
func (a *agent) badCallAt(rng *rand.Rand, i int, planted []string) badCall {
	switch n := rng.IntN(10); {
	case n < 4:
		return a.invalidCall(rng, i)
	case n < 6 && len(planted) > 0:
		return a.wrongTypeCall(planted[rng.IntN(len(planted))])
	case n < 9:
		return a.oddCall(rng, i)
	default:
		return a.edgeCall(rng, i)
	}
}

var (
	badTTLs  = []time.Duration{0, -time.Second, dlock.MinTTL - 1, 1, math.MinInt64}
	badSizes = []int64{0, -1, math.MinInt64}
	kinds    = []string{"mutex", "fair", "read", "write", "sem"}
)

// invalidCall draws an empty name, a TTL below MinTTL, or a Semaphore size or count below
// 1 (the accept-bad mutation puts good values in their place). Names start with "inv-":
// no key of that name may appear.
func (a *agent) invalidCall(rng *rand.Rand, i int) badCall {
	cmd := command{Kind: kinds[rng.IntN(len(kinds))], Name: fmt.Sprintf("inv-%d", i), TTL: time.Second, Size: 3, N: 1, Try: rng.IntN(2) == 0}
	switch rng.IntN(4) {
	case 0:
		cmd.Name = ""
	case 1:
		cmd.TTL = badTTLs[rng.IntN(len(badTTLs))]
		cmd.ZeroTTL = cmd.TTL == 0
	case 2:
		cmd.Kind, cmd.Size = "sem", badSizes[rng.IntN(len(badSizes))]
	default:
		cmd.Kind, cmd.N = "sem", badSizes[rng.IntN(len(badSizes))]
	}
	if a.cfg.Mutation == mutAcceptBad {
		cmd.Name = cmp.Or(cmd.Name, "accepted")
		cmd.TTL, cmd.Size, cmd.N = max(cmd.TTL, dlock.MinTTL), max(cmd.Size, 1), max(cmd.N, 1)
		cmd.ZeroTTL = false
	}
	return badCall{class: badInvalid, desc: describe(cmd), call: a.lockCall(cmd)}
}

// wrongTypeCall calls the kind that spec ("kind:name:key") says on the planted name.
func (a *agent) wrongTypeCall(spec string) badCall {
	parts := strings.SplitN(spec, ":", 3)
	cmd := command{Kind: parts[0], Name: parts[1], TTL: time.Second, Size: 3, N: 1}
	return badCall{class: badWrongType, desc: describe(cmd), key: parts[2], call: a.lockCall(cmd)}
}

// oddNames are valid names that a key layout could trip over; braceNames have a '}'
// outside a hash tag, which dlock may refuse (its companion keys could not share a
// Cluster slot), but only with an error, at once.
var (
	oddNames   = []string{"{", "a{b}c", "{x}", "x y\nz", "\x00\xff\x01", "名前🔒", ":fence", "*?[]", strings.Repeat("n", 10000)}
	braceNames = []string{"}", "{}", "}{", "a}b"}
)

func (a *agent) oddCall(rng *rand.Rand, i int) badCall {
	class, names := badOdd, oddNames
	if rng.IntN(3) == 0 {
		class, names = badBraces, braceNames
	}
	cmd := command{Kind: kinds[rng.IntN(len(kinds))], Name: fmt.Sprint(names[rng.IntN(len(names))], i), TTL: time.Second, Size: 3, N: 1, Try: true}
	return badCall{class: class, desc: describe(cmd), call: a.lockCall(cmd)}
}

// edgeCall draws TTLs at the extremes: exactly MinTTL, a thousand hours, the largest
// Duration.
func (a *agent) edgeCall(rng *rand.Rand, i int) badCall {
	ttls := []time.Duration{dlock.MinTTL, 1000 * time.Hour, math.MaxInt64}
	cmd := command{Kind: kinds[rng.IntN(len(kinds))], Name: fmt.Sprintf("edge-%d", i), TTL: ttls[rng.IntN(len(ttls))], Size: 3, N: 1, Try: true}
	return badCall{class: badEdge, desc: describe(cmd), call: a.lockCall(cmd)}
}

func (a *agent) lockCall(cmd command) func(ctx context.Context) (holding, error) {
	return func(ctx context.Context) (holding, error) { return a.acquire(ctx, cmd) }
}

// describe says what a call was, with the name shortened and quoted.
func describe(cmd command) string {
	name := cmd.Name
	if len(name) > 20 {
		name = fmt.Sprintf("%s…(%d bytes)", name[:20], len(name))
	}
	op := "Lock"
	if cmd.Try {
		op = "TryLock"
	}
	return fmt.Sprintf("%s %q %s TTL=%v size=%d n=%d", cmd.Kind, name, op, cmd.TTL, cmd.Size, cmd.N)
}
