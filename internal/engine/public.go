package engine

// Public is how the engine makes what the public package owns, without importing it: its
// quorum errors. The public package passes one, all set, to NewClient.
type Public struct {
	// Error is the public error of an operation that did not get the nodes it needed.
	Error func(Shortfall) error
}
