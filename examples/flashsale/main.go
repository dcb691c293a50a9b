// Flashsale shows a flash sale that oversells without a lock, sells exactly its stock with
// dlock, and refuses the write of a holder that was paused past its lease when the
// UPDATE carries the lock's fencing token.
//
// Buyers are goroutines, each with its own Redis connections and dlock Client, as
// separate services would have. Each purchase reads the stock from a real SQL database,
// pays (5ms), then runs UPDATE ... SET stock = stock - 1. Without a lock, buyers read the
// same stock and the stock goes negative. With dlock, each purchase runs alone. Last, the
// UPDATE carries the fencing token (... WHERE id = $2 AND last_token < $1): a buyer whose
// short lease ran out during a pause comes back, writes, and is refused.
//
// Run it from the repository root:
//
//	go run ./examples/flashsale                        # SQLite in a temporary directory
//	go run ./examples/flashsale --db shop.db           # SQLite file, kept
//	go run ./examples/flashsale --db postgres://user:pass@localhost:5432/shop
//	go run ./examples/flashsale --redis redis://localhost:6379 --buyers 20 --stock 50
//
// Redis is --redis, else $DLOCK_REDIS, else redis://127.0.0.1:6379, else (when nothing
// answers there) an embedded Redis; --redis embedded asks for that one. On PostgreSQL the
// example creates the tables flashsale_products and flashsale_orders if they do not
// exist, and empties them.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/seed51c676c8/dlock/examples/internal/cli"
	"github.com/seed51c676c8/dlock/examples/internal/exredis"
)

func main() { cli.Main("flashsale", run) }

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("flashsale", flag.ContinueOnError)
	redisURL := exredis.Flag(fs)
	dsn := fs.String("db", "", "the shop's database: an SQLite file path, or a PostgreSQL `URL` postgres://user:password@host:port/db\n"+
		"(default: a new SQLite file in a temporary directory)")
	buyers := fs.Int("buyers", 10, "concurrent buyers")
	stock := fs.Int("stock", 20, "items for sale")
	if err := cli.Parse(fs, args); err != nil {
		return err
	}
	if *buyers < 2 || *stock < 1 {
		return errors.New("--buyers must be at least 2 and --stock at least 1")
	}

	srv, err := exredis.Open(ctx, *redisURL)
	if err != nil {
		return err
	}
	defer srv.Close()
	st, err := openStore(ctx, *dsn)
	if err != nil {
		return err
	}
	defer st.close()

	fmt.Fprintf(stdout, "Flash sale: %d buyers, each a service with its own dlock Client, race for %d game consoles.\n", *buyers, *stock)
	fmt.Fprintf(stdout, "Redis:    %s\nDatabase: %s\n\n", srv.Desc, st.desc)
	fmt.Fprintf(stdout, "Each purchase reads the stock, pays (%v), then runs\n", paymentTime)
	fmt.Fprintf(stdout, "  UPDATE flashsale_products SET stock = stock - 1 WHERE id = $1\n\n")

	fmt.Fprintf(stdout, "%-16s %5s %11s\n", "run", "sold", "stock left")
	for _, withLock := range []bool{false, true} {
		r, err := sale(ctx, st, srv, *buyers, *stock, withLock)
		if err != nil {
			return err
		}
		name, verdict := "without a lock", fmt.Sprintf("oversold by %d", r.sold-*stock)
		if r.sold <= *stock {
			verdict = "not oversold this time: try more --buyers"
		}
		if withLock {
			name, verdict = "with dlock", "exactly the stock"
		}
		fmt.Fprintf(stdout, "%-16s %5d %11d   %s\n", name, r.sold, r.left, verdict)
		if withLock && (r.sold != *stock || r.left != 0) {
			return fmt.Errorf("with dlock the sale sold %d of %d items and left %d", r.sold, *stock, r.left)
		}
	}
	fmt.Fprintf(stdout, "\nFencing: the lock's token goes into the UPDATE, and the row refuses a token smaller than its last:\n")
	fmt.Fprintf(stdout, "  %s\n\n", fencedUpdate)
	r, err := fencing(ctx, st, srv, *stock)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "  buyer A  locks with a %v lease, not renewed: token %d; reads stock %d\n", staleTTL, r.tokenA, r.stockA)
	fmt.Fprintf(stdout, "  buyer A  pauses (a long GC pause, a stopped VM): its lease runs out\n")
	fmt.Fprintf(stdout, "  buyer B  locks: token %d; reads stock %d; UPDATE with token %d: %s\n", r.tokenB, r.stockB, r.tokenB, rows(r.wroteB))
	fmt.Fprintf(stdout, "  buyer A  resumes after %v, its lease lost (%v), and writes anyway\n", r.pause.Round(time.Millisecond), r.errA)
	fmt.Fprintf(stdout, "  buyer A  UPDATE with token %d: %s", r.tokenA, rows(r.wroteA))
	if !r.wroteA {
		fmt.Fprintf(stdout, ": refused, the row's last_token is %d", r.lastToken)
	}
	fmt.Fprintf(stdout, "\n           (without the token check the same UPDATE changes %d row: rolled back here)\n\n", r.unfencedRows)
	if r.wroteA || !r.wroteB {
		return fmt.Errorf("fencing: the database accepted A's write: %v, B's: %v", r.wroteA, r.wroteB)
	}
	fmt.Fprintf(stdout, "%d sold, stock %d: the stale holder's write was refused.\n", r.sold, r.left)
	return nil
}

func rows(wrote bool) string {
	if wrote {
		return "1 row updated"
	}
	return "0 rows updated"
}
