package engine

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/batch"
	"github.com/seed51c676c8/dlock/internal/scripts"
)

// votes is what the nodes answered to one call each. Every script dlock runs replies with
// an integer: more than zero is a yes (acquired, with the fencing token; released;
// extended), zero or less a no (gone; or held: an acquire script's refusal, which says how
// long the holder has left and which holder it is, decoded by scripts.Refusal).
type votes struct {
	n        int
	vals     []int64 // each node's reply, where answered and not failed
	answered []bool
	errs     []error // each node's error, where it failed; made at the first failure
	yes, no  int
	failed   int
	// silentAt marks the nodes that were silent when the poll began (node.silentUntil);
	// silent counts those that have not answered yet.
	silentAt []bool
	silent   int
	decided  bool  // the caller's decide said so before every node answered or time ran out
	ctxErr   error // ctx's error when the poll ended, if ctx ended it
	start    time.Time

	// What hearLate needs of the poll: its calls, to which the replies it did not wait
	// for are still written, the nodes it sent to (nil: all), its per-node timeout, and
	// whether a node it did not hear from is silent (record).
	calls    []batch.Call
	only     []int
	timeout  time.Duration
	silenced bool
	sent     int          // calls sent
	seen     int          // replies counted
	each     []nodeAnswer // by node, for a poll of several parts; nil for one
	parts    []partCount  // by part, for a poll of several parts; nil for one

	// Storage for the replies of up to inlineNodes nodes, and for the call of a poll of one
	// deployment and its arguments, which then allocates once, or never (recycle).
	valsBuf     [inlineNodes]int64
	answeredBuf [inlineNodes]bool
	silentBuf   [inlineNodes]bool
	callsBuf    [1]batch.Call
	argsBuf     [maxLoneArgs]any
}

// maxLoneArgs is room for the arguments of the call of a poll of one deployment (the
// Mutex's scripts take 8 at most), which a kind's prepare appends to call.Args.
const maxLoneArgs = 8

const inlineNodes = 5

// quorumVotes is the votes of a poll of up to inlineNodes nodes with its calls, in one
// allocation. The calls outlive the poll when it returns before every node answered (an
// abandoned call is still written to), and keep the votes alive with them, which is why
// they are not pooled.
type quorumVotes struct {
	votes
	calls [inlineNodes]batch.Call
}

// lonePolls keeps the votes of polls of one deployment for one part once recycle has
// found that nothing writes to them any more: an uncontended Lock+Unlock then allocates
// none.
var lonePolls sync.Pool

// recycle gives v back for another poll, if it was a poll of one deployment for one part
// whose one call was answered and counted: the batcher writes to a call only until it
// hands it back, and an abandoned call (its reply not counted) may still be written to,
// by a late reply. The caller must not use v afterwards.
func (v *votes) recycle() {
	if v.n != 1 || v.sent != 1 || v.seen != 1 { // one node, one part, one call
		return
	}
	*v = votes{}
	lonePolls.Put(v)
}

func (v *votes) failedAt(node int) bool { return v.errs != nil && v.errs[node] != nil }

func newVotes(n, parts int) (*votes, []batch.Call) {
	var v *votes
	var calls []batch.Call
	switch {
	case parts > 1: // a MultiMutex over several hash slots: a call per part and node
		v, calls = &votes{}, make([]batch.Call, n*parts)
		v.splitParts(n, parts)
	case n == 1:
		v, _ = lonePolls.Get().(*votes)
		if v == nil {
			v = &votes{}
		}
		calls = v.callsBuf[:]
		calls[0].Args = v.argsBuf[:0]
	case n <= inlineNodes:
		q := &quorumVotes{}
		v, calls = &q.votes, q.calls[:n]
	default:
		v, calls = &votes{}, make([]batch.Call, n)
	}
	v.n, v.start = n, time.Now()
	if n <= inlineNodes {
		v.vals, v.answered, v.silentAt = v.valsBuf[:n], v.answeredBuf[:n], v.silentBuf[:n]
	} else {
		v.vals, v.answered, v.silentAt = make([]int64, n), make([]bool, n), make([]bool, n)
	}
	return v, calls
}

// reply counts the reply of node for part. With several parts, each part counts its yes
// and no on its own, and yes and no are the fewest yes and the most no of any part: a
// MultiMutex's parts may be held by different majorities (acquireParts takes each on its
// own), and it holds all its names while every part has a majority. A node counts as
// answered, for its silence and for problems, once every part has answered (nodeAnswer).
func (v *votes) reply(node, part int, val int64, err error) {
	v.seen++
	if v.each == nil {
		v.tally(node, val, err)
		return
	}
	switch p := &v.parts[part]; {
	case err != nil:
	case val > 0:
		p.yes++
	default:
		p.no++
	}
	if a := &v.each[node]; a.add(val, err) {
		v.mark(node, a.val, a.err)
	}
	v.yes, v.no = v.parts[0].yes, v.parts[0].no
	for _, p := range v.parts[1:] {
		v.yes, v.no = min(v.yes, p.yes), max(v.no, p.no)
	}
}

// partCount is one part's yes and no, in a poll of several parts.
type partCount struct{ yes, no int }

// A nodeAnswer folds one node's replies to the calls of several parts into what the node
// is marked with once every part has answered (votes.mark: its silence, its error for
// problems): a refusal if any part refused, else an error if any part failed, else the
// smallest yes. The yes and no that decide are counted by part (votes.reply).
type nodeAnswer struct {
	val     int64
	err     error
	refused bool
	left    int // parts still to answer
}

// splitParts makes v count each of parts on its own, for n nodes.
func (v *votes) splitParts(n, parts int) {
	v.each, v.parts = make([]nodeAnswer, n), make([]partCount, parts)
	for i := range v.each {
		v.each[i].left = parts
	}
}

// add counts one part's reply, and reports whether every part has now answered.
func (a *nodeAnswer) add(val int64, err error) bool {
	a.left--
	switch {
	case a.refused:
	case err == nil && val <= 0:
		a.refused, a.val, a.err = true, val, nil
	case err != nil:
		a.err = err
	case a.err == nil && (a.val == 0 || val < a.val):
		a.val = val
	}
	return a.left == 0
}

// tally counts node's answer: its reply val, or the error of its call.
func (v *votes) tally(node int, val int64, err error) {
	v.mark(node, val, err)
	switch {
	case err != nil:
	case val > 0:
		v.yes++
	default:
		v.no++
	}
}

// mark records that node answered, with val or err, as tally does, but counts it neither
// a yes nor a no (reply counts those by part).
func (v *votes) mark(node int, val int64, err error) {
	v.answered[node] = true
	if v.silentAt[node] {
		v.silent--
	}
	if err != nil {
		v.failed++
		if v.errs == nil {
			v.errs = make([]error, v.n)
		}
		v.errs[node] = err
		return
	}
	v.vals[node] = val
}

// markSilent notes which of the polled nodes are silent as the poll begins.
func (v *votes) markSilent(nodes []*Node, only []int) {
	if len(nodes) == 1 {
		return // one deployment: there is no one else to settle the attempt
	}
	polled(nodes, only, func(i int) {
		if nodes[i].silent() {
			v.silentAt[i] = true
			v.silent++
		}
	})
}

// record tells each polled node whether it replied, and reports whether some node the
// poll did not hear from is now silent, whose late reply hearLate must wait for. A node
// is found silent by a poll that waited the whole per-node timeout for it, and stays
// silent while the polls that did not wait for it end without its reply.
func (v *votes) record(nodes []*Node, only []int, timeout time.Duration) (late bool) {
	if len(nodes) == 1 {
		return false
	}
	waited := !v.decided && v.ctxErr == nil
	polled(nodes, only, func(i int) {
		switch {
		case v.answered[i] && isReply(v.errAt(i)):
			nodes[i].replied()
		case !v.answered[i] && (waited || v.silentAt[i]):
			nodes[i].missed(timeout)
			late = true
		}
	})
	return late
}

func (v *votes) errAt(node int) error {
	if v.errs == nil {
		return nil
	}
	return v.errs[node]
}

// polled calls f with the index of each node a poll sent to: those in only, or all.
func polled(nodes []*Node, only []int, f func(i int)) {
	if only != nil {
		for _, i := range only {
			f(i)
		}
		return
	}
	for i := range nodes {
		f(i)
	}
}

// cannotWin reports that an attempt can no longer get need nodes: more than n-need
// refused or failed. Once every node that is not silent has answered and one of them
// refused, the silent ones that have not count as failed: the attempt is held or split
// whatever they would say, and waiting for them would keep the contenders' shares of the
// other nodes taken for the per-node timeout. They are still waited for when too few
// nodes are left without them for any verdict: a majority down is an error to report.
func (v *votes) cannotWin(need int) bool {
	lost := v.no + v.failed
	if lost > v.n-need {
		return true
	}
	return v.no > 0 && v.unanswered() == v.silent && lost+v.silent > v.n-need && v.failed+v.silent <= v.n-need
}

// settled is an attempt's decide: a majority granted, or it cannot get one.
func (v *votes) settled(need int) bool { return v.yes >= need || v.cannotWin(need) }

// releaseSettled is a release's decide: every node answered, or enough to tell the
// outcome (released, or no longer held).
func (v *votes) releaseSettled(n, need int) bool {
	return v.yes+v.no == n || (v.yes > 0 && v.yes+v.no >= need) || v.no > n-need
}

// A verdict is what one acquisition attempt came to.
type verdict int

const (
	acquired verdict = iota // a majority granted, with time left on the lease
	late                    // a majority granted, but the lease would already have ended
	held                    // one holder has a majority: wait for it
	split                   // contenders split the nodes; no one has a majority
	failed                  // nodes failed or did not answer: no verdict
)

// verdict judges an attempt from its votes, need of which must agree; inTime says whether
// the lease still had time left when the votes were in. Nodes that failed, or did not
// answer before the poll gave up, can block any verdict but a grant.
func (v *votes) verdict(need int, inTime bool) verdict {
	blocked := v.failed
	if !v.decided {
		blocked += v.unanswered()
	}
	switch {
	case v.yes >= need && inTime:
		return acquired
	case v.yes >= need:
		return late
	case blocked > v.n-need:
		return failed
	case v.heldByOne() >= need:
		return held
	}
	return split
}

// heldByOne is the most nodes that refused on behalf of one holder. A node that refused
// for no single holder (readers, permits, a waiting writer) counts for every holder, as if
// the same holders held them all: waiting for them is what the caller must do anyway.
func (v *votes) heldByOne() int {
	var tags [inlineNodes]uint16
	byTag, unknown, most := tags[:0], 0, 0
	for i, val := range v.vals {
		if !v.answered[i] || val > 0 || v.failedAt(i) {
			continue
		}
		switch _, tag := scripts.Refusal(val); tag {
		case 0:
			unknown++
		default:
			byTag = append(byTag, tag)
		}
	}
	for _, tag := range byTag {
		most = max(most, countTag(byTag, tag))
	}
	return most + unknown
}

func countTag(tags []uint16, tag uint16) int {
	n := 0
	for _, t := range tags {
		if t == tag {
			n++
		}
	}
	return n
}

// refusedLeft lists how long each node that refused said its holder has left (0: unknown).
func (v *votes) refusedLeft() []time.Duration {
	var left []time.Duration
	for i, val := range v.vals {
		if v.answered[i] && val <= 0 && !v.failedAt(i) {
			l, _ := scripts.Refusal(val)
			left = append(left, l)
		}
	}
	return left
}

// gone reports whether a node refused because the attempt's token (or waiter id) was
// served or left for good (scripts.Gone).
func (v *votes) gone() bool {
	for i, val := range v.vals {
		if v.answered[i] && !v.failedAt(i) && scripts.Gone(val) {
			return true
		}
	}
	return false
}

// refusers lists the nodes that refused: they answered with a reply <= 0.
func (v *votes) refusers() []int {
	var nodes []int
	for i, val := range v.vals {
		if v.answered[i] && val <= 0 && !v.failedAt(i) {
			nodes = append(nodes, i)
		}
	}
	return nodes
}

// unanswered is how many nodes of a poll of every node never answered.
func (v *votes) unanswered() int {
	if v.each == nil {
		return v.n - v.yes - v.no - v.failed
	}
	n := 0
	for _, a := range v.answered {
		if !a {
			n++
		}
	}
	return n
}

// problems lists what went wrong in a poll of every node, in the order of the nodes: the
// nodes that failed, and, if the poll ran out of time rather than reaching a verdict, the
// nodes that did not answer (which probeSilent may explain).
func (v *votes) problems(nodes []*Node) []Failure {
	var silence error
	var waited time.Duration
	if !v.decided {
		waited = time.Since(v.start).Round(time.Millisecond)
		silence = fmt.Errorf("no answer within %v (down, unreachable, hung or slow)", waited)
		if v.ctxErr != nil {
			silence = fmt.Errorf("no answer before the context ended (%w, after %v)", v.ctxErr, waited)
		}
	}
	var out []Failure
	for i, answered := range v.answered {
		switch {
		case v.failedAt(i):
			f := Failure{Addr: nodes[i].Name, Err: v.errs[i]}
			if v.ctxErr == nil && errors.Is(f.Err, context.DeadlineExceeded) {
				// The round trip's own deadline ran out, go-redis dialling on (it retries a
				// refused dial): silent too, and probed for what is known.
				f.silent, f.waited = nodes[i], time.Since(v.start).Round(time.Millisecond)
			}
			out = append(out, f)
		case !answered && silence != nil:
			f := Failure{Addr: nodes[i].Name, Err: silence}
			if v.ctxErr == nil {
				f.silent, f.waited = nodes[i], waited
			}
			out = append(out, f)
		}
	}
	return out
}

// probeTimeout bounds the dial that asks why a node did not answer: a refusal or an
// unreachable network answers at once, and a blackholed address is not waited for long.
const probeTimeout = 50 * time.Millisecond

// probeSilent says, for each failure of a node that did not answer in time, why, when a
// dial can tell, and returns fs: go-redis keeps a failed dial's error to itself when the
// call's deadline passes first (its pool dials on, and only logs the error), so a node on
// a closed port would read as merely silent. The dial is the node's own (its client's
// Dialer: its network, TLS, Sentinel), one per silent node. Only the errors returned to a
// caller (Lock, Extend, Unlock) probe; renewals, which fail every tick for every hold on
// a node that is down, do not.
func probeSilent(fs []Failure) []Failure {
	var wg sync.WaitGroup
	for i := range fs {
		if fs[i].silent == nil {
			continue
		}
		rdb, ok := fs[i].silent.RDB.(*redis.Client)
		if !ok || rdb.Options().Dialer == nil {
			continue // a Cluster: no one address to ask
		}
		waited := fs[i].waited
		wg.Go(func() {
			o := rdb.Options()
			ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
			defer cancel()
			conn, err := o.Dialer(ctx, o.Network, o.Addr)
			switch {
			case err == nil:
				conn.Close()
				fs[i].Err = fmt.Errorf("no answer within %v, though it accepts connections (hung or slow)", waited)
			case ctx.Err() == nil:
				fs[i].Err = fmt.Errorf("no answer within %v: %w", waited, err)
			}
		})
	}
	wg.Wait()
	return fs
}

// reset clears the counts for another set of answers of parts parts, polled at start (a
// renewal batch counts each hold's in turn).
func (v *votes) reset(start time.Time, parts int) {
	clear(v.vals)
	clear(v.answered)
	v.errs, v.each, v.parts = nil, nil, nil
	v.yes, v.no, v.failed, v.start = 0, 0, 0, start
	if parts > 1 {
		v.splitParts(v.n, parts)
	}
}
