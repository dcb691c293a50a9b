// Package guard is the client side of Lease.Guard: the pipeline the caller fills, the
// commands packed as the arguments of one script (internal/scripts/guard.lua), the
// script's replies given back to the caller's commands typed as go-redis types them, and,
// on a Redis Cluster, the keys of the commands checked against the lock's hash slot before
// anything is sent.
//
// Why one script rather than WATCH, MULTI and EXEC: the hold is checked when the commands
// run, with the server's clock, in the one atomic step that runs them, so a call that
// lands late (held back, resent) runs nothing once the lease has ended, for every kind,
// including the Semaphore's and the readers' leases, which end by their score in a sorted
// set and not by a key's expiry that WATCH would see. It costs one round trip, on any
// connection, and never retries. The price is here: the replies come back as one array
// and are typed again by this package (Fill), for the reply types it knows (Supported);
// a command of another type is refused before anything is sent.
package guard
