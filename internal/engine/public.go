package engine

// Public is how the engine makes what the public package owns, without importing it: its
// leases and its quorum errors. The public package passes one, all set, to NewClient.
type Public struct {
	// NewHeld returns a zero Hold and a zero Lease, its outer lease, with Lease.Handle set
	// to the public lease that wraps it. The public package allocates all three at once:
	// an acquisition costs one allocation for the hold, its lease and the lease's context
	// values (see leaseValues).
	NewHeld func() (*Hold, *Lease)
	// NewLease returns a zero Lease (a re-entrant one) with Handle set likewise.
	NewLease func() *Lease
	// Error is the public error of an operation that did not get the nodes it needed.
	Error func(Shortfall) error
}
