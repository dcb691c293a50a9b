package faults

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/faultproxy"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// acked is the WithReplicaAcks of the agents that ask for acknowledgements: one replica,
// within 500ms (generous: a replica in step answers within a millisecond or two here, but
// the machine may be loaded).
var acked = &acksConfig{Replicas: 1, Timeout: 500 * time.Millisecond}

// windowTTL is the leases' TTL in the window scenarios: long enough that the first
// holder still holds its lease, until its renewal at TTL/3, when the second takes it.
const windowTTL = 6 * time.Second

// replicated is a deployment with replicas, as the window scenario drives it.
type replicated struct {
	conf     agentConfig          // the lock deployment, for the agents
	cut      func()               // cuts the replication link of the master that serves name's locks
	failover func()               // promotes that master's replica
	name     func(string) string  // a lock name served by that master
	other    string               // a lock name served by a master whose link is not cut; "" if none
	master   func() *redis.Client // a client of the master that serves name's locks
}

// failoverWindow: the failover window, and what acknowledgements make of it. K takes a
// lock with WithReplicaAcks; the replication link of the master is cut; A takes a lock
// without acknowledgements, and K's next acquisition, with them, fails with
// ErrNotReplicated and leaves no key; the replica is promoted; B then gets A's lock while
// A still holds its lease (the documented limitation, counted), but not K's, which the
// promoted replica had.
func failoverWindow(deploy func(r *run) replicated) func(r *run) {
	return func(r *run) {
		d := deploy(r)
		store := redistest.Start(r.t)
		agent := func(name string, acks *acksConfig) *child {
			conf := d.conf
			conf.Name, conf.Store, conf.Acks = name, store.Addr, acks
			return spawn(r, conf)
		}
		a, k, b := agent("A", nil), agent("K", acked), agent("B", nil)
		kept, lost, refused := d.name("kept"), d.name("lost"), d.name("refused")
		k.send(command{Op: "lock", ID: "kept", Name: kept, TTL: windowTTL})
		if _, ok := k.expectEv(evAcquired, "kept", chkAcks); !ok {
			return
		}
		d.cut()
		r.step("replication cut")
		a.send(command{Op: "lock", ID: "lost", Name: lost, TTL: windowTTL})
		if _, ok := a.expectEv(evAcquired, "lost", chkNoErrors); !ok {
			return
		}
		refusedUnacked(r, k, d, refused)
		if d.other != "" {
			// The WAIT went to the master of the key, not to any master.
			k.send(command{Op: "lock", ID: "other", Name: d.other, TTL: windowTTL, Try: true})
			k.expectEv(evAcquired, "other", chkAcks)
		}
		d.failover()
		r.step("failed over")
		b.send(command{Op: "lock", ID: "lost", Name: lost, TTL: windowTTL, Wait: 10 * time.Second})
		b.expectEv(evAcquired, "lost", chkNoErrors)
		b.send(command{Op: "lock", ID: "kept", Name: kept, TTL: windowTTL, Try: true})
		e := b.awaitEv(evAcquired, "kept")
		r.expect(e.Ev == evFailed && e.Kind == "not-acquired", chkAcks,
			"B's TryLock of the lock K took with acknowledgements, after the failover: %s %s; want ErrNotAcquired (the promoted replica has it)", e.Ev, e.Err)
		a.awaitWithin(windowTTL, isEnd("lost")) // its renewal finds the key gone
		finishAll(a, k, b)
		ivs := intervals(a, k, b)
		checkLossOnTime(r, filter(ivs, func(iv interval) bool { return iv.proc != "B" }))
		window(r, byName(ivs, lost))
	}
}

// refusedUnacked has K try a lock while no replica can acknowledge it: it must fail with
// ErrNotReplicated, and the master must not keep the key.
func refusedUnacked(r *run, k *child, d replicated, name string) {
	k.send(command{Op: "lock", ID: "refused", Name: name, TTL: windowTTL, Try: true})
	e := k.awaitEv(evAcquired, "refused")
	r.expect(e.Ev == evFailed && e.Kind == "not-replicated", chkAcks,
		"K's TryLock with acknowledgements and the replication cut: %s %s; want ErrNotReplicated", e.Ev, e.Err)
	if e.Ev == evFailed {
		r.note("with acknowledgements: %s", e.Err)
	}
	master := d.master()
	for deadline := time.Now().Add(2 * time.Second); ; r.sleep(20 * time.Millisecond) {
		n, err := master.Exists(context.Background(), lockKey(name)).Result()
		if err == nil && n == 0 {
			return
		}
		if time.Now().After(deadline) {
			r.violate(chkAcks, "the master still has the key of the acquisition that was not replicated (%d, %v)", n, err)
			return
		}
	}
}

// window notes the second holder of the lock A took without acknowledgements: the
// documented limitation, and the scenario's figure.
func window(r *run, ivs []interval) {
	var overlap float64
	for _, p := range overlaps(ivs, 1) {
		overlap = ms(p[0].to - p[1].from)
		r.note("documented limitation, without acknowledgements: %v and %v held the lock at once for %.0f ms (tokens %d and %d)",
			p[0], p[1], overlap, p[0].token, p[1].token)
	}
	r.value(overlap)
}

func sentinelWindow(r *run) replicated {
	var link *faultproxy.Proxy
	s := redistest.StartSentinel(r.t, redistest.WithReplicaLink(func(master string) string {
		link = faultproxy.New(r.t, master)
		return link.Addr
	}))
	master := s.Master.Client(r.t)
	return replicated{
		conf: agentConfig{Sentinel: &sentinelConfig{Master: s.MasterName, Addrs: s.Addrs()}},
		cut: func() {
			link.Cut(r.t)
			awaitNoReplica(r, master)
		},
		failover: func() { s.Failover(r.t) },
		name:     func(n string) string { return n },
		master:   func() *redis.Client { return master },
	}
}

func clusterWindow(r *run) replicated {
	cl := redistest.StartCluster(r.t, 3, redistest.WithReplica())
	master := cl.Servers[0].Client(r.t)
	return replicated{
		conf:     agentConfig{Cluster: append([]string(nil), cl.Addrs...)},
		cut:      func() { cl.CutReplication(r.t, 0) },
		failover: func() { cl.TakeOver(r.t, 0) },
		name:     func(n string) string { return nameOn(r, cl, 0, n) },
		other:    nameOn(r, cl, 1, "other"),
		master:   func() *redis.Client { return master },
	}
}

// awaitNoReplica waits until the master sees no replica connected.
func awaitNoReplica(r *run, master *redis.Client) {
	for deadline := time.Now().Add(10 * time.Second); ; r.sleep(10 * time.Millisecond) {
		info, err := master.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "connected_slaves:0") {
			return
		}
		if time.Now().After(deadline) {
			r.fatalf("setup: the master still sees its replica 10s after the link was cut (%v)", err)
		}
	}
}

// awaitReplica waits until the master has a replica online (what WithReplicaAcks needs).
func awaitReplica(r *run, master *redis.Client) {
	for deadline := time.Now().Add(30 * time.Second); ; r.sleep(50 * time.Millisecond) {
		info, err := master.Info(context.Background(), "replication").Result()
		if err == nil && strings.Contains(info, "state=online") {
			return
		}
		if time.Now().After(deadline) {
			r.fatalf("the master has no replica online 30s after the old master was restarted (%v)", err)
		}
	}
}

// nameOn returns a lock name, prefix followed by a number, whose keys master i of cl
// serves.
func nameOn(r *run, cl *redistest.Cluster, i int, prefix string) string {
	c := cl.Servers[0].Client(r.t)
	for n := 0; n < 10000; n++ {
		name := fmt.Sprintf("%s%d", prefix, n)
		if masterOf(r, cl, c, name) == i {
			return name
		}
	}
	r.fatalf("setup: no name %s<n> on master %d", prefix, i)
	return ""
}

// masterOf returns the index of the master of cl that serves the lock name (the masters
// serve equal ranges of slots, in order).
func masterOf(r *run, cl *redistest.Cluster, c *redis.Client, name string) int {
	slot, err := c.ClusterKeySlot(context.Background(), lockKey(name)).Result()
	if err != nil {
		r.fatalf("setup: CLUSTER KEYSLOT: %v", err)
	}
	return int(slot) * len(cl.Servers) / 16384
}

// clusterFailover: on a Cluster of 3 masters with a replica each, three agents contend
// for one lock (2 goroutines each) with WithReplicaAcks, through go-redis cluster clients
// with their default slot-map reload interval (a minute), and A holds another lock
// throughout; the lock's master is failed over by hand (CLUSTER FAILOVER on its replica)
// and then the new master is killed (SIGKILL), so that the old one takes over after the
// node timeout (5s), and the killed one is restarted, to become its replica: until then
// the master has no replica, and acquisitions fail with ErrNotReplicated. What must hold: the counter under the lock is exact, holds do not
// overlap and tokens grow; every Lock returns; A's lease, if lost, is lost by its
// ValidUntil; and a Lock on the lock's master works afterwards: dlock found the replica
// that took over.
func clusterFailover(r *run) {
	cl := redistest.StartCluster(r.t, 3, redistest.WithReplica())
	d := &deployment{store: redistest.Start(r.t)}
	d.data = d.store.Client(r.t)
	i := masterOf(r, cl, cl.Servers[0].Client(r.t), "hot")
	long, after := nameOn(r, cl, i, "long"), nameOn(r, cl, i, "after")
	conf := agentConfig{Store: d.store.Addr, Cluster: append([]string(nil), cl.Addrs...), Acks: acked}
	var agents []*child
	for _, name := range []string{"A", "B", "C"} {
		conf.Name = name
		agents = append(agents, spawn(r, conf))
	}
	a := agents[0]
	a.send(command{Op: "lock", ID: "long", Name: long, TTL: failoverTTL})
	if _, ok := a.expectEv(evAcquired, "long", chkNoErrors); !ok {
		return
	}
	const dur = 14 * time.Second
	for _, c := range agents {
		c.send(command{Op: "contend", ID: "c", Name: "hot", TTL: failoverTTL, Wait: dur, N: 2})
	}
	r.sleep(time.Second)
	cl.Failover(r.t, i)
	r.step("failed over by hand")
	r.sleep(time.Second)
	cl.Servers[i].Kill(r.t)
	cl.AwaitFailover(r.t, i)
	r.step("the new master killed; its replica took over")
	cl.Replicas[i].Restart(r.t) // it rejoins as the replica of the master that took over
	awaitReplica(r, cl.Servers[i].Client(r.t))
	r.step("the killed master restarted, now a replica in step")
	holds, fails := awaitContention(agents)
	a.send(command{Op: "unlock", ID: "long"})
	a.awaitEv(evDone, "long")
	a.send(command{Op: "lock", ID: "after", Name: after, TTL: failoverTTL, Wait: 10 * time.Second})
	a.expectEv(evAcquired, "after", chkNoErrors)
	finishAll(agents...)
	ivs := intervals(agents...)
	checkCounted(r, d, byName(ivs, "hot"), holds)
	checkLossOnTime(r, byName(ivs, long))
	r.value(float64(fails))
	r.note("%d holds, %d failed calls", holds, fails)
}

// awaitContention waits for every agent's contend command and sums its holds and failed
// calls.
func awaitContention(agents []*child) (holds, fails int64) {
	for _, c := range agents {
		e := c.awaitEv(evDone, "c")
		holds, fails = holds+e.N, fails+e.M
	}
	return holds, fails
}
