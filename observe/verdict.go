package observe

// Verdict is what one attempt came to.
type Verdict int

const (
	// VerdictAcquired: the lock was taken (on a quorum, by a majority, with time left).
	VerdictAcquired Verdict = iota
	// VerdictHeld: another holder has it; the caller waits for its release.
	VerdictHeld
	// VerdictSplit: on a quorum, contenders split the nodes and no one has a majority.
	VerdictSplit
	// VerdictLate: a majority granted, but too late for any of the lease to be left.
	VerdictLate
	// VerdictFailed: nodes failed or did not answer, so there is no verdict (Err says why).
	VerdictFailed
)

// String returns "acquired", "held", "split", "late" or "failed"; "unknown" for any
// other value.
func (v Verdict) String() string {
	switch v {
	case VerdictAcquired:
		return "acquired"
	case VerdictHeld:
		return "held"
	case VerdictSplit:
		return "split"
	case VerdictLate:
		return "late"
	case VerdictFailed:
		return "failed"
	}
	return "unknown"
}

// LossCause is why a hold was lost.
type LossCause int

const (
	// NotLost: the hold was released by Unlock (or by Close), or handed to the next
	// waiter of this process.
	NotLost LossCause = iota
	// LossExpired: its deadline passed before a renewal succeeded (Redis could not be
	// reached or answered too late, or the lease was not renewed).
	LossExpired
	// LossTaken: Redis said the key no longer held the lease's token: it expired there,
	// was deleted (FLUSHALL, ForceUnlock, a failover that lost it) or taken by another.
	LossTaken
)

// String returns "released", "expired" or "taken"; "unknown" for any other value.
func (c LossCause) String() string {
	switch c {
	case NotLost:
		return "released"
	case LossExpired:
		return "expired"
	case LossTaken:
		return "taken"
	}
	return "unknown"
}
