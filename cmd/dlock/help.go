package main

import (
	"fmt"
	"strings"
)

// The help texts are the command's reference. README.md in this directory holds the same
// text (a test checks it), so that it can be read without building dlock.

// topHelp is 'dlock help'.
func topHelp() string {
	var b strings.Builder
	b.WriteString(`dlock: distributed locks on Redis, from the command line

Usage: dlock COMMAND [flags] [ARGS...]

Commands:
`)
	for _, c := range commands {
		if !c.hidden {
			fmt.Fprintf(&b, "  %-8s %s\n", c.name, c.summary)
		}
	}
	b.WriteString(`
Flags may come before or after the arguments; 'dlock COMMAND --help' shows a command's.
Long flags take --name VALUE or --name=VALUE (-name VALUE, as earlier dlocks took it,
still works); short ones -w 5s or -w5s, and short switches combine (-sv). After --,
nothing is a flag. 'dlock --version' is 'dlock version'.

Servers (every command):
  -r, --redis URL
                a Redis server: redis://[user:password@]host[:port][/db], or rediss://
                for TLS; or a master found through its Sentinels:
                redis+sentinel://[user:password@]host[:port][,host[:port]...]/master[/db]
                (the Sentinels' port is 26379 unless given; rediss+sentinel:// for TLS
                to the Sentinels and the master). Repeat --redis for a Redlock quorum of
                independent servers (3 or 5). Default: $DLOCK_REDIS, else $REDIS_URL,
                else redis://127.0.0.1:6379 (demo and bench: an embedded Redis).
                The user and password are the server's (the master's): a Redis ACL user,
                or the password alone for the default user. Percent-encode special
                characters in them. Sentinels that require a password of their own get
                it from the query: ?sentinel-password=PW (and sentinel-user=USER).
  -c, --cluster the URLs are seed nodes of one Redis Cluster (Redis 7 or later)
  --tls-ca FILE the CA certificates (PEM) that sign the servers' certificates; without
                it, the system's trust store
  --tls-cert FILE, --tls-key FILE
                a client certificate and its private key (PEM), for servers that ask
                clients for one (tls-auth-clients)
  --tls-server-name NAME
                the name the servers' certificates must have, if not the URL's host (for
                a Sentinel URL: the host of each Sentinel, and the master's address)
  -p, --prefix P
                the key namespace (default "dlock:"); "" for bare keys, shared with
                Redlock clients in other languages
  -v, --verbose log what the library does (lost leases, failed renewals) on stderr
The --tls-* flags apply to every TLS URL that does not set its own in its query:
?tls-ca=FILE&tls-cert=FILE&tls-key=FILE&tls-server-name=NAME. dlock always checks the
server's certificate: there is no option to turn that off.
Passwords never appear in dlock's output, logs or errors: they are masked everywhere.

Exit codes:
  0      success
  1      a failure not listed below (a Redis error, the demo's own checks)
  2      bad usage: unknown command or flag, bad URL, TLS file or lock name, or a
         combination that cannot work (--fair on a quorum, --shared with --permits)
  3      leader: the election has no leader
  69     Redis cannot be used: unreachable, too slow, no Sentinel names the master, the
         TLS handshake failed (a certificate not trusted, expired or refused), or it
         refused the credentials or a command
  70     run: the lock was lost while the command ran, and the command was stopped
  75     run: the lock was not acquired in time (someone else holds it); try later
  126    run: the command cannot be executed
  127    run: the command was not found
  128+N  run: the command died from signal N (or dlock did, while waiting for the lock)
  other  run: the command's own exit code

Environment:
  DLOCK_REDIS   server URLs, comma-separated, used when no --redis is given (percent-
                encode a comma in a password as %2C; the commas between the Sentinels
                of a Sentinel URL stay as they are)
  REDIS_URL     one server URL (as many Redis clients and hosting platforms name it),
                used when neither --redis nor DLOCK_REDIS is given
  DLOCK_NAME    set by 'dlock run' for the command: the lock's name
  DLOCK_TOKEN   set by 'dlock run' for the command: the fencing token, a decimal integer
                larger than that of every earlier holder of the lock. Give it to the
                storage you write to, and have it refuse writes that carry a smaller token
                than it has seen: that makes a holder that was paused past its lease
                harmless ('dlock demo' shows it).
`)
	return b.String()
}

const serverFlagsHelp = `  -r, --redis URL, -c, --cluster, --tls-ca FILE, --tls-cert FILE, --tls-key FILE,
  --tls-server-name NAME, -p, --prefix P, -v, --verbose
                 the servers and the key namespace: see 'dlock help'
`

const runSummary = "run a command while holding a lock: dlock run [flags] NAME -- CMD [ARGS...]"

const runHelp = `Usage: dlock run [flags] NAME -- CMD [ARGS...]

Runs CMD while holding the lock NAME, like flock(1) across machines. The lock is a dlock
Mutex or, as one of --fair, --shared, --exclusive, --permits and --elect chooses, a
FairMutex, either side of an RWMutex, permits of a Semaphore, or a term of an Election
(CMD runs while leading). dlock run:
  - takes the lock, waiting up to --wait (by default it makes one attempt);
  - runs CMD with DLOCK_NAME (the lock's name) and DLOCK_TOKEN (the fencing token) in
    its environment;
  - renews the lease every TTL/3 while CMD runs;
  - forwards SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1 and SIGUSR2 to CMD;
  - when CMD exits, releases the lock and exits with CMD's exit code, or 128+N if CMD
    died from signal N.
If the lock is lost while CMD runs (its key expired, was deleted or taken, or renewal
failed until the lease ran out), dlock says so, sends SIGTERM to CMD, then SIGKILL after
--grace, and exits 70: CMD's work may have overlapped another holder's.
If the lock is not acquired within --wait, dlock exits 75 and says how long the holder's
lease has left.

CMD runs in its own process group, so that forwarded signals, and the SIGTERM and SIGKILL
of a lost lock, reach CMD and every process it started. A process group that is not in
the foreground cannot read the terminal, so when stdin is a terminal CMD's stdin is
/dev/null. For an interactive command use --foreground: CMD then stays in dlock's process
group and uses the terminal; signals reach CMD itself only (and Ctrl-C reaches it twice:
from the terminal and through dlock).

If dlock itself is killed with SIGKILL, CMD goes on without the lock, which expires after
--ttl. Use fencing tokens (DLOCK_TOKEN) where that matters.

Flags:
  -t, --ttl D    lease length, renewed every TTL/3 (default 30s, at least 10ms); also how
                 long a crashed holder keeps the others out
  -w, --wait D   how long to wait for the lock. The default is one attempt, no waiting
                 (0), where flock, consul lock and etcdctl lock wait: a job that finds
                 the lock taken exits 75 at once. "forever" waits without limit.
                 Waiting does not poll: dlock wakes when the holder releases or its
                 lease runs out
  --grace D      after the lock is lost, the time between SIGTERM and SIGKILL (default
                 10s; at most half of --ttl)
  --fair         take the lock in request order across all processes (a FairMutex);
                 with --wait 0 it is taken only if it is free and no one waits. Needs
                 one deployment (a server or a Cluster), not a quorum
  -s, --shared   take the read side of an RWMutex (flock -s): any number of --shared
                 holders run at once, and none while an --exclusive one does. A writer
                 that waits keeps new readers out, so that readers cannot starve it
  -x, --exclusive
                 take the write side of the RWMutex (flock -x): alone, with no --shared
                 holder. A plain 'dlock run NAME' (a Mutex) keeps readers out too, but
                 does not wait for those that hold the lock: with readers, use this
  --permits N, --size M
                 take N permits of a Semaphore of M permits: up to M are held at once,
                 as 'consul lock -n M' allows M holders (each of them takes --permits 1,
                 which --size alone means). Every holder must give the same --size: it
                 is not stored in Redis
  --elect        lead the Election NAME (dlock.Election): CMD runs while this term leads,
                 and others see --value with 'dlock leader' and 'dlock observe'. A lost
                 term is a lost lock (exit 70); CMD's exit resigns. Candidates are not
                 served in order
  --value V      the leader's value with --elect, such as this host's address (at most
                 64 KiB; default "")
  --foreground   keep CMD in dlock's process group, with the terminal (see above)
` + serverFlagsHelp + `
Exit codes: CMD's own; 128+N if CMD died from signal N; 70 the lock was lost; 75 not
acquired in time; 69 Redis cannot be used; 126 CMD cannot be executed; 127 CMD not found;
2 bad usage.

Examples:
  dlock run nightly-report -- ./report.sh --full
  dlock run --wait 5m --ttl 1m deploy -- make deploy
  dlock run -s -w 1m config -- ./read-config.sh
  dlock run -x -w 1m config -- ./rewrite-config.sh
  dlock run --permits 1 --size 4 -w forever encoder -- ./encode.sh
  dlock run --elect --value "$(hostname):8080" -w forever scheduler -- ./scheduler
  DLOCK_REDIS=rediss://app:secret@redis.internal:6380 dlock run cron:cleanup -- ./cleanup
  dlock run --redis redis+sentinel://app:secret@s1,s2,s3/mymaster backup -- ./backup.sh
`

const statusSummary = "show who holds locks: dlock status [flags] NAME..."

const statusColumns = `  KIND     the kind of lock (see Kinds below); for a key of another type, its Redis
           type; "-" when the lock is free
  HOLDER   the holder's token (of a mutex, a FairMutex, an RWMutex's writer): the lock
           key's value, 128 random bits, new for every acquisition; "-" when the lock is
           free, or held by readers or by Semaphore holders
  OWNER    the name of the Client that holds it (dlock's WithOwner; by default
           host:pid); for readers and Semaphore holders each owner once, comma-
           separated; "-" when free or not known (a holder written by another library)
  FENCE    the fencing counter: the fencing token of the latest acquisition
  TTL      how long the hold has left: the holder's lease, "no expiry" if the key has
           none; an RWMutex held by readers: until the last reader's lease ends; a
           Semaphore: until the first holder's lease ends
  WAITERS  a FairMutex or a Semaphore: the live entries of its queue, one per waiting
           Lock or Acquire. Other kinds (and a Semaphore on a quorum, whose waiters do
           not queue): client processes subscribed to the lock's release channel
           (PUBSUB NUMSUB, or PUBSUB SHARDNUMSUB on a Cluster). A process counts once
           however many of its goroutines wait, and stays subscribed for up to 30s
           after its last wait ended, so the holder itself may count.
  DETAIL   rw: the mode (write, read or free), the live readers and the waiting
           writers; semaphore: "in use N by M holders", the permits the live holders
           hold (the size is not stored in Redis); a free lock whose queue still has
           live entries: "free, N waiters queued"; else "-"

Kinds, as dlock tells them apart by the keys that exist:
  mutex      a Mutex: a string lock key that holds the holder's token
  fair       a FairMutex: the same string key, and a queue (the list <tag>:queue, with
             deadlines in <tag>:queue:deadlines). A FairMutex that no one waits for has
             no queue: it is indistinguishable from a mutex, and shows as one
  rw         an RWMutex: a string write key (the writer's token), and sorted sets of
             readers (<tag>:readers) and waiting writers (<tag>:writers). A writer
             alone, with no reader and no writer waiting, has only the write key: it
             shows as a mutex
  semaphore  a Semaphore: a sorted set of holders at the lock key, and a hash of the
             permits each holds (<tag>:permits); a queue like a FairMutex's
<tag> is the lock key in braces, {dlock:NAME}, or the key itself if it has a hash tag.
Each lock is read by one script, so its numbers come from one instant; a lease or a
queue entry is live until its end by the Redis server's clock (TIME).
`

const statusHelp = `Usage: dlock status [flags] NAME...

Shows each lock NAME, free or held:
` + statusColumns + `
On a quorum there is one row per server (NODE).

Flags:
  -j, --json
           print a JSON array, one object per lock (per lock and server on a quorum):
           name, key, node (quorum only), held (someone holds the lock: its key exists;
           an RWMutex: a writer or a live reader; a Semaphore: a live holder), kind and
           holder (absent when free), owner (as OWNER; absent when not known), fence (0 before the first acquisition), ttl_ms
           (null when free, -1 without expiry), waiters; for an RWMutex also mode,
           readers, writers_waiting; for a Semaphore holders, permits_in_use, queue; for
           a FairMutex (and a free lock with a queue) queue: the live queue entries
` + serverFlagsHelp + `
Examples:
  dlock status nightly-report deploy
  dlock status --redis rediss://redis.internal:6380 --tls-ca ca.pem nightly-report
`

const listSummary = "list the locks under the prefix: dlock list [flags] [PATTERN]"

const listHelp = `Usage: dlock list [flags] [PATTERN]

Lists the locks whose names match PATTERN (a Redis glob: * ? [abc]; default *), with
the columns of 'dlock status'. It SCANs the keys under the prefix (on every master of a
Cluster, on every server of a quorum), skips dlock's companion keys (fencing counters,
queues and their deadlines, readers and writers sets, permits) and shows each lock
once. A free lock has no key, so only held locks are listed (a free FairMutex is not,
even while its queue has entries), and keys of other programs under the prefix with
their Redis type as KIND. An RWMutex held by readers alone has no lock key: list finds
it by its readers set, with a second SCAN (a third when PATTERN is not *).

Columns:
` + statusColumns + `
Flags:
  -j, --json
           print a JSON array, as 'dlock status --json' does
` + serverFlagsHelp + `
Example:
  dlock list 'cron:*'
`

const topSummary = "a live view of the locks under the prefix: dlock top [flags] [PATTERN]"

const topCmdHelp = `Usage: dlock top [flags] [PATTERN]

A live view of the locks whose names match PATTERN (default *), found and read as
'dlock list' finds and reads them, with its columns (below). It changes
nothing. It reads them again every --interval and shows them on the terminal's alternate
screen:
  - most WAITERS first; then the hold that ends soonest (TTL; a hold without expiry
    after those); then by NAME. On a quorum, the rows of a lock stay together;
  - the header names the servers, the pattern, the number of locks and the time of the
    latest refresh;
  - a table wider than the terminal shortens HOLDER, then OWNER, then NAME (an
    ellipsis marks the cut), then is cut at the right; the rows that do not fit are counted in a last line,
    "+N more".
When a refresh fails (a server went away or does not answer within 5s), the second line
says why; the rows of the latest refresh that worked stay, and top tries again at every
interval. q, Ctrl-C, SIGINT, SIGTERM and SIGHUP end it: it restores the terminal and
exits 0.

With --once, or when stdout is not a terminal (a pipe, a file), top prints one view, in
full (no truncation, no control codes), and exits: 0, or as 'dlock list' does when Redis
cannot be used. Servers that cannot be used at the start end top as any command: 69.

Columns:
` + statusColumns + `
Flags:
  -i, --interval D
                the time between refreshes (default 1s, at least 100ms)
  --once        print one view and exit
` + serverFlagsHelp + `
Examples:
  dlock top
  dlock top --interval 5s 'cron:*'
  dlock top --once >locks.txt
`

const leaderSummary = "the leader of an election: dlock leader [flags] NAME"

const leaderHelp = `Usage: dlock leader [flags] NAME

Prints the leader of the Election NAME (dlock.Election; 'dlock run --elect' campaigns in
one), as one line:
  NAME: "VALUE" (term TOKEN, owner "OWNER", since TIME)
VALUE is the value the leader proclaimed, TOKEN its term's fencing token (greater than
every earlier term's), OWNER the name of its Client (WithOwner; by default host:pid),
TIME when the term began, by the Redis server's clock (RFC 3339, UTC). A term leads only
while its lock holds its token: the election is read on every server, and on a quorum a
term leads when a majority agree. With no leader it prints "NAME: no leader" and exits 3.

Flags:
  -j, --json
           print one JSON object: name, leading (true or false), value, token (0 when
           none), owner and since (absent when none)
` + serverFlagsHelp + `
Exit codes: 0 a leader; 3 no leader; 69 Redis cannot be used; 2 bad usage.

Examples:
  dlock leader scheduler
  curl "http://$(dlock leader --json scheduler | jq -r .value)/status"
`

const observeSummary = "each change of an election's leader: dlock observe [flags] NAME"

const observeHelp = `Usage: dlock observe [flags] NAME

Prints the leader of the Election NAME, then each change as it happens, one line each,
until interrupted (SIGINT, SIGTERM, SIGHUP: exit 0):
  TIME  "VALUE" (term TOKEN, owner "OWNER", since SINCE)
  TIME  no leader
  TIME  cannot read the election: WHY
TIME is when dlock saw the change (RFC 3339, UTC); the rest is as 'dlock leader' prints
it. A new term, a new value and a resignation show within about a round trip; a leader
that died (its term expired with no successor) within the time its term had left. Changes
faster than dlock prints them may be merged: the latest is never missed. When the servers
cannot be read it says so and tries again, with backoff.

Flags:
  -j, --json
           print JSON lines: the object of 'dlock leader --json', with time, and error
           when the election could not be read
` + serverFlagsHelp + `
Examples:
  dlock observe scheduler
  dlock observe --json scheduler | jq -r 'select(.leading) | .value'
`

const unlockSummary = "remove a stuck lock (operators): dlock unlock --force [flags] NAME..."

const unlockHelp = `Usage: dlock unlock --force [flags] NAME...

For operators: removes a stuck lock, publishes on the lock's release channel so that
waiters wake at once (SPUBLISH on a Cluster), and says what it removed or that nothing
was held. It never removes the fencing counter (tokens must keep growing), nor a queue
or the waiting writers: waiters keep their order. By kind ('dlock help status'):
  mutex      deletes the lock key; says the holder's token and the time its lease had
             left
  fair       the same. A FairMutex's waiters do not listen on the release channel but
             each on its own: unlock also tells the first live waiter of the queue on
             its channel, so that it takes the lock at once rather than at its next
             refresh of its place (within 1s)
  rw         deletes the write key (the writer's token) and the readers' sorted set.
             With readers holding it, only with --readers: without it, unlock removes
             nothing of that lock, says how many readers hold it and exits 1
  semaphore  deletes the holders and their permits, every holder at once; says how
             many held how many permits
Keys of other types are left alone, and unlock exits 1.

It removes only what it has seen: it reads the lock, then removes it only if no lease
was taken since (the fencing counter and the lock key are as read), so that a removal
that reaches Redis late, after unlock gave up, never removes a newer holder. When one
was taken in between, it reads again and tries again, 5 times at most; a lock that
changes hands every time is in use, not stuck: unlock removes nothing, says so and
exits 1.

A holder that is still alive learns at its next renewal (within a third of its TTL) that
its lock is lost, and 'dlock run' then stops its command; until then two holders may run
at once, and only fencing tokens protect your data. That is why unlock refuses without
--force. To release a lock you hold, let its holder finish.

Flags:
  -f, --force
             required: the holder is gone, or must be stopped
  --readers  also remove the readers of an RWMutex
  -j, --json print a JSON array, one object per lock (per lock and server on a quorum):
             name, key, node (quorum only), removed, kind, holder, ttl_ms; for an
             RWMutex also readers (the live readers found) and readers_removed; for a
             Semaphore holders and permits_in_use (what was removed); for a FairMutex
             queue_head (the waiter told on its channel, absent when none); changed
             true when the lock changed hands before every removal (nothing removed)
` + serverFlagsHelp + `
Exit codes: 0 done (or nothing was held); 1 a key is not a dlock lock, an RWMutex
still has readers (no --readers), or a lock changed hands before every removal; 69
Redis cannot be used; 2 bad usage.

Examples:
  dlock unlock --force nightly-report
  dlock unlock --force --readers config-doc
`

const demoSummary = "the flash sale: why a lock, and why guarded writes"

const demoHelp = `Usage: dlock demo [flags]

The flash sale. --buyers buyer processes (dlock starts copies of itself) race to buy
from a stock of --stock items kept in Redis. Each purchase reads the stock, takes the
payment (1ms), then takes one item. Three rounds:
  1. without a lock: buyers read the same stock at once and sell items that do not
     exist; the stock goes below zero;
  2. with dlock: each purchase holds the lock; exactly the stock is sold;
  3. with dlock and guarded writes: each purchase takes its item with Lease.Guard,
     which Redis applies only while the lease holds the lock. One buyer is frozen
     (SIGSTOP) while it holds the lock, past its short lease; the others go on; when it
     wakes (SIGCONT) its guarded write is refused and applies nothing. On a quorum, which
     Guard refuses, the store checks fencing tokens instead: it remembers the largest
     token it has seen and refuses writes with a smaller one.
It prints a table of the three rounds, and a progress line while it runs (when stdout is
a terminal). It takes a few seconds.

With no --redis (and no DLOCK_REDIS) it runs on an embedded Redis (miniredis) on a
loopback port, so it needs no set-up. On a real server it uses keys under
"dlock-demo:" and the lock "demo:{flash-sale}" under the prefix, and deletes the store's
keys when done.

Flags:
  --buyers N   buyer processes (default 8, at least 2)
  --stock N    items for sale (default 50)
` + serverFlagsHelp + `
Exit codes: 0 when rounds 2 and 3 sold exactly the stock (and round 3 refused the stale
write); 1 when they did not; 69 Redis cannot be used.
`

const benchSummary = "measure lock throughput and wait times"

const benchHelp = `Usage: dlock bench [flags]

Measures, for --duration each:
  (a) uncontended Lock+Unlock per second: every goroutine locks its own name;
  (b) hand-offs per second on one hot lock that all goroutines want, each holding it for
      --hold: the wait before each acquisition (p50, p99, max, and a histogram with
      log-scale buckets), and the lock's utilisation: the sum of the hold times (from
      Lock returning to Unlock returning) over the wall time.
The goroutines run in --processes worker processes (dlock starts copies of itself), which
report their samples to this one as JSON.

With no --redis (and no DLOCK_REDIS) it runs on an embedded Redis (miniredis): that tests
the set-up, but its numbers say nothing about a real server.

Flags:
  --goroutines N   goroutines in all (default 8), spread over the processes
  --processes P    worker processes (default 2, at most --goroutines)
  --hold D         the critical section of (b) (default 1ms)
  --duration D     how long each measurement runs (default 5s, at least 50ms)
  --kind K         mutex (default), or fair (FairMutex: strict order, no local queue;
                   one deployment only)
  -j, --json       print the results as one JSON object: servers, kind, goroutines,
                   processes, hold_ms, duration_ms, embedded, uncontended {ops,
                   ops_per_sec}, contended {handoffs, handoffs_per_sec, wait_p50_ms,
                   wait_p99_ms, wait_max_ms, utilisation, histogram [{le_ms, count}]}
` + serverFlagsHelp + `
Example:
  dlock bench --redis redis://10.0.0.5:6379 --goroutines 32 --processes 4
`

const versionSummary = "print dlock's version"

const versionHelp = `Usage: dlock version, or dlock --version

Prints dlock's version as the build recorded it: the module version for 'go install
github.com/seed51c676c8/dlock/cmd/dlock@VERSION' (for a build from a git checkout, a
pseudo-version that names the commit); else the commit, with "-dirty" if the source had
uncommitted changes; else "devel", as under 'go run', which records neither. No version
of dlock is tagged yet.
`

const helpSummary = "this reference; 'dlock help COMMAND' for one command"

const helpHelp = `Usage: dlock help [COMMAND]

Prints the reference (commands, servers, exit codes, environment), or the help of one
command, which 'dlock COMMAND --help' prints too.
`
