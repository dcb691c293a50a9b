package faults

import "time"

// scenarios is the suite, in the order of the report.
var scenarios = []scenario{
	{
		name:    "pause-one",
		fault:   "one server; holder A stopped (SIGSTOP) for 2×TTL (TTL 1s); B takes the lock; A resumes and writes with its stale token",
		asserts: "B gets the lock only after A's ValidUntil; the fenced storage refuses A's write; A sees its lease lost at once; tokens grow",
		checks:  []string{chkExclusive, chkFencing, chkLossOnTime, chkTokens},
		runs:    2, limit: time.Minute,
		figure: figure{"B took over %.0f ms after A's ValidUntil (least)", worstMin},
		run:    pauseHolder(1),
	},
	{
		name:    "pause-quorum",
		fault:   "pause-one on a quorum of 3 independent servers",
		asserts: "as pause-one",
		checks:  []string{chkExclusive, chkFencing, chkLossOnTime, chkTokens},
		runs:    2, limit: time.Minute,
		figure: figure{"B took over %.0f ms after A's ValidUntil (least)", worstMin},
		run:    pauseHolder(3),
	},
	{
		name:    "delayed-replies",
		fault:   "holder A works under a lock (TTL 600ms) through a proxy that then delays every reply by 2×TTL; B locks directly",
		asserts: "A sees its lease end by ValidUntil and writes nothing after; B gets the lock after A's ValidUntil; a Lock through the slow link returns no expired lease",
		checks:  []string{chkExclusive, chkLossOnTime, chkWritesValid, chkFencing, chkBelief},
		runs:    2, limit: time.Minute,
		figure: figure{"A saw its loss %+.1f ms from its ValidUntil (latest)", worstMax},
		run:    linkLost(delayReplies),
	},
	{
		name:    "cutoff",
		fault:   "holder A works under a lock (TTL 600ms) through a proxy that then cuts the link (connections closed, new ones refused); B locks directly",
		asserts: "as delayed-replies",
		checks:  []string{chkExclusive, chkLossOnTime, chkWritesValid, chkFencing, chkBelief},
		runs:    2, limit: time.Minute,
		figure: figure{"A saw its loss %+.1f ms from its ValidUntil (latest)", worstMax},
		run:    linkLost(cutLink),
	},
}
