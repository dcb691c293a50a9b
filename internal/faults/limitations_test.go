package faults

// limitations are what dlock cannot do alone; each names the scenarios that show it.
var limitations = []Limitation{
	{
		Title: "Persistence",
		Risk: "A quorum node that crashes and comes back empty forgets the locks it granted, and its " +
			"fencing counter: a second holder can get the lock, and a token can repeat.",
		Do: "run every node with `appendonly yes` and `appendfsync always`; or, for the locks alone, keep a " +
			"crashed node down for longer than your longest TTL before it rejoins (the counters still want AOF).",
		Scenarios: []string{"restart-aof", "restart-late", "tokens-restarts"},
	},
	{
		Title:     "Delayed restarts",
		Risk:      "Without persistence, a node that rejoins at once can grant a lock a majority still holds.",
		Do:        "start a crashed node again only after the longest TTL in use has passed since it went down.",
		Scenarios: []string{"restart-late"},
	},
	{
		Title: "Clock discipline",
		Risk: "Each server expires keys by its own wall clock. A clock stepped forward on one node of a " +
			"majority ends the lock there early, and another client can get a majority while the first still " +
			"holds it: two holders at once. The drift allowance covers slow or fast clocks, not jumps.",
		Do: "keep server clocks in step with NTP in slewing mode (chrony's default, or ntpd -x); never set a " +
			"server's clock by hand; do not let a VM resume with a stepped clock.",
		Scenarios: []string{"clock-step"},
	},
	{
		Title: "Replication",
		Risk: "Redis replicates asynchronously. When Sentinel (or a Cluster) promotes a replica, the writes " +
			"the old master took that had not reached it are gone: a lock just granted, and the last " +
			"increments of its fencing counter, so a second holder can appear and a token can repeat.",
		Do: "for locks that must survive a failover, use a quorum of independent masters (NewQuorum); " +
			"with one replicated deployment, WithReplicaAcks narrows the window (a lock no replica acknowledged " +
			"is refused), but WAIT is not consensus: a replica that did not acknowledge can still be promoted, so " +
			"rely on fencing and keep the storage refusing tokens it has seen.",
		Scenarios: []string{"failover-manual", "failover-kill", "failover-window", "failover-window-cluster"},
	},
	{
		Title: "Fencing",
		Risk: "A lease is a promise about time. A holder paused past its lease (GC, a frozen VM, SIGSTOP) " +
			"does not know until it looks, and may write after another holder took over.",
		Do: "pass Lease.Token() to the storage you protect and have it refuse a token smaller than the " +
			"largest it has seen; watch lease.Context() in the critical section.",
		Scenarios: []string{"pause-one", "pause-quorum", "clock-step", "cutoff"},
	},
}
