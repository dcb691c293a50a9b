package redistest

// config collects what the Options set.
type config struct {
	args             []string
	password         string
	tls              *tlsSetup                      // WithTLS
	sentinelPassword string                         // WithSentinelPassword
	replicaLink      func(masterAddr string) string // WithReplicaLink
	replica          bool                           // WithReplica
}

// Option configures a server started by Start, StartNodes, StartCluster or
// StartSentinel.
type Option func(*config)

// WithArgs appends extra redis-server command-line arguments, one argv element
// each, e.g. WithArgs("--notify-keyspace-events", "Kgx"). They come after the
// package's own arguments, so for single-valued settings they win.
func WithArgs(args ...string) Option {
	return func(c *config) { c.args = append(c.args, args...) }
}

// WithPassword starts the server with --requirepass pw. Options, Client and
// (for clusters) Cluster.Client then authenticate with it, and so does the
// readiness check.
func WithPassword(pw string) Option {
	return func(c *config) { c.password = pw }
}

func newConfig(opts []Option) config {
	var c config
	for _, o := range opts {
		o(&c)
	}
	return c
}
