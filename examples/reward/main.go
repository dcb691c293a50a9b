// Reward shows a reward that a family may claim once, claimed by several family members
// at the same moment: without a lock the family gets it several times, with dlock once.
//
// Each member is a goroutine with its own Redis connections and dlock Client, as the
// family's phones talking to different app servers would be. A claim checks that the
// family has no claim yet (SELECT COUNT(*)), verifies the family with the rewards service
// (a few milliseconds), then inserts the claim. The table has no unique constraint, as in
// many real schemas, where "once per family" is a rule of the code: without a lock, every
// member passes the check before any insert lands. With dlock, the claims of one family
// run one at a time under the lock "example:reward:family:NAME", and the second member finds the
// first one's claim. (In your schema, add the unique constraint as well if it can be
// expressed: the lock is what lets the losers be told "already claimed" before anything
// is paid out.)
//
// Run it from the repository root:
//
//	go run ./examples/reward                           # SQLite in a temporary directory
//	go run ./examples/reward --families 5 --members 6 --db rewards.db
//
// Redis is --redis, else $DLOCK_REDIS, else redis://127.0.0.1:6379, else (when nothing
// answers there) an embedded Redis; --redis embedded asks for that one.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/seed51c676c8/dlock/examples/internal/cli"
	"github.com/seed51c676c8/dlock/examples/internal/exredis"
)

func main() { cli.Main("reward", run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("reward", flag.ContinueOnError)
	redisURL := exredis.Flag(fs)
	path := fs.String("db", "", "SQLite `file` for the claims (default: a new file in a temporary directory)")
	families := fs.Int("families", 3, "families")
	members := fs.Int("members", 4, "members of each family who claim at the same moment")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *families < 1 || *members < 2 {
		return errors.New("--families must be at least 1 and --members at least 2")
	}

	srv, err := exredis.Open(ctx, *redisURL)
	if err != nil {
		return err
	}
	defer srv.Close()
	st, err := openStore(ctx, *path)
	if err != nil {
		return err
	}
	defer st.close()

	fmt.Fprintf(stdout, "Reward: %d families; in each, %d members claim the welcome bonus at the same moment.\n", *families, *members)
	fmt.Fprintf(stdout, "A family may claim it once.\nRedis:    %s\nDatabase: %s\n\n", srv.Desc, st.desc)
	fmt.Fprintf(stdout, "A claim: SELECT COUNT(*) ... WHERE family = $1; if 0: verify (%v), INSERT the claim.\n\n", verifyTime)

	names := make([]string, *families)
	for i := range names {
		names[i] = fmt.Sprintf("family-%d", i+1)
	}
	var without, with map[string]int
	for _, withLock := range []bool{false, true} {
		rows, err := claimAll(ctx, st, srv, names, *members, withLock)
		if err != nil {
			return err
		}
		if withLock {
			with = rows
		} else {
			without = rows
		}
	}

	fmt.Fprintf(stdout, "%-10s  %21s  %17s\n", "family", "claims without a lock", "claims with dlock")
	var totalWithout, totalWith int
	var wrong []string
	for _, f := range names {
		fmt.Fprintf(stdout, "%-10s  %21d  %17d\n", f, without[f], with[f])
		totalWithout += without[f]
		totalWith += with[f]
		if with[f] != 1 {
			wrong = append(wrong, fmt.Sprintf("%s has %d claims", f, with[f]))
		}
	}
	fmt.Fprintf(stdout, "%-10s  %21d  %17d\n\n", "total", totalWithout, totalWith)
	if len(wrong) > 0 {
		return fmt.Errorf("with dlock: %s", strings.Join(wrong, ", "))
	}
	if extra := totalWithout - *families; extra > 0 {
		fmt.Fprintf(stdout, "Without a lock, %d rewards were paid out that should not have been.\n", extra)
	} else {
		fmt.Fprintf(stdout, "Without a lock, the race did not show this time: try more --members.\n")
	}
	fmt.Fprintf(stdout, "With dlock, every family got its reward exactly once.\n")
	return nil
}
