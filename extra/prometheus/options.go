package dlockprom

// An Option configures a Collector made by New.
type Option func(*config)

// DefaultMaxNames is how many distinct lock-name labels a Collector makes when
// WithMaxNames does not say: the names after that are counted under OtherName.
const DefaultMaxNames = 100

// OtherName is the name label of every lock whose name came after the bound
// (WithMaxNames), or whose WithNameLabel function returned "", and the owner label of
// every owner that came after the bound (WithMaxOwners).
const OtherName = "other"

// DefaultMaxOwners is how many distinct owner labels a Collector made WithOwnerLabel
// gives when WithMaxOwners does not say: the owners after that are counted under
// OtherName.
const DefaultMaxOwners = 10

// DefaultWaitBuckets and DefaultHoldBuckets are the upper bounds, in seconds, of the wait
// and hold histograms' buckets: from a millisecond (a Lock that found the lock free, on a
// local network) to five minutes.
var (
	DefaultWaitBuckets = []float64{0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300}
	DefaultHoldBuckets = DefaultWaitBuckets
)

type config struct {
	nameLabel   func(name string) string
	maxNames    int
	ownerLabel  bool
	maxOwners   int
	waitBuckets []float64
	holdBuckets []float64
}

func newConfig(opts []Option) config {
	c := config{maxNames: DefaultMaxNames, maxOwners: DefaultMaxOwners, waitBuckets: DefaultWaitBuckets, holdBuckets: DefaultHoldBuckets}
	for _, o := range opts {
		if o != nil {
			o(&c)
		}
	}
	return c
}

// WithNameLabel makes f choose the name label of each event from the lock's name: lock
// names such as "order:42" are unbounded, and a label per name would make a series per
// order. For example, f may keep what comes before the first ':'. An empty result counts
// the event under OtherName. f is called once per event, on the goroutine that sends it,
// so it must be fast and safe for concurrent use; it should return few distinct values,
// since only the first WithMaxNames of them get a label of their own. nil means the
// lock's name itself, the default.
func WithNameLabel(f func(name string) string) Option {
	return func(c *config) { c.nameLabel = f }
}

// WithMaxNames bounds the distinct name labels at n (after WithNameLabel): once n names
// have a label, the events of any other name are counted under OtherName, so that a
// program with unbounded lock names keeps a bounded number of series. A name keeps the
// label it was given first. n <= 0 means DefaultMaxNames.
func WithMaxNames(n int) Option {
	return func(c *config) {
		if n <= 0 {
			n = DefaultMaxNames
		}
		c.maxNames = n
	}
}

// WithOwnerLabel adds the label owner, the owner name of the Client that sent the event
// (dlock.WithOwner; "" for a Client without one), to every metric that has name and
// kind. It is off by default: the default owner, "host:pid", changes at every restart, so
// each restart starts new series and leaves the old ones to go stale, and a query that
// does not sum over owner sees one series per owner. Only the first WithMaxOwners owners
// get a label of their own.
func WithOwnerLabel() Option {
	return func(c *config) { c.ownerLabel = true }
}

// WithMaxOwners bounds the distinct owner labels at n, apart from the bound on names: once
// n owners have a label, the events of any other owner are counted under OtherName, and
// an owner keeps the label it was given first. A Collector normally sees one owner per
// Client it observes, all in its own process; the bound keeps a program that names its
// Clients by request or by job from multiplying the series. The empty owner counts
// against no bound. n <= 0 means DefaultMaxOwners. It has no effect without
// WithOwnerLabel.
func WithMaxOwners(n int) Option {
	return func(c *config) {
		if n <= 0 {
			n = DefaultMaxOwners
		}
		c.maxOwners = n
	}
}

// WithWaitBuckets sets the upper bounds, in seconds, of the wait histogram's buckets (see
// prometheus.HistogramOpts.Buckets). nil or empty means DefaultWaitBuckets.
func WithWaitBuckets(bounds []float64) Option {
	return func(c *config) {
		if len(bounds) > 0 {
			c.waitBuckets = bounds
		}
	}
}

// WithHoldBuckets sets the upper bounds, in seconds, of the hold histogram's buckets. nil
// or empty means DefaultHoldBuckets.
func WithHoldBuckets(bounds []float64) Option {
	return func(c *config) {
		if len(bounds) > 0 {
			c.holdBuckets = bounds
		}
	}
}
