// Package redistest starts real redis-server processes, Redis Cluster (with a
// replica per master if asked) and Sentinel deployments, and TLS servers with
// certificates made for the test, replicas of a server (StartReplica), and fails
// those deployments over (Failover, AwaitFailover, TakeOver; WithReplicaLink and
// Cluster.CutReplication to cut replication alone): the
// one harness behind dlock's own tests, the public dlocktest package, the
// examples' tests and the benchmark program (StartMain). Fault-injecting
// proxies are in faultproxy.
//
// Every server listens on a free loopback port (127.0.0.1 only), keeps no
// data on disk (no RDB snapshots, no AOF) and is killed by testing.TB.Cleanup
// of the test that started it. On Linux a server is also killed by the kernel
// if the test process dies (Pdeathsig); as a second line of defence each
// server has a pid file in os.TempDir()/dlock-redistest/, and the first Start
// in a test process kills redis-servers whose owning test process is gone.
//
// A missing redis-server (or redis-sentinel) binary fails the test (never
// skips it) with a message that says how to install one; set
// REDIS_SERVER=/path/to/redis-server (REDIS_SENTINEL=/path/to/redis-sentinel)
// to use a specific binary.
//
// All functions and methods are safe for concurrent use by parallel tests.
// Like testing.TB.Fatal, the methods that take a testing.TB must be called
// from the goroutine running the test.
package redistest
