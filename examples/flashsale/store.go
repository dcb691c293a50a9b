package main

import (
	"context"
	"database/sql"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx": PostgreSQL
	_ "modernc.org/sqlite"             // database/sql driver "sqlite": SQLite in pure Go
)

// The shop's tables. last_token is the largest fencing token that has written the row;
// only the fenced run uses it. The same SQL runs on SQLite and PostgreSQL.
var schema = []string{
	`CREATE TABLE IF NOT EXISTS flashsale_products (
		id         INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		stock      INTEGER NOT NULL,
		last_token BIGINT  NOT NULL DEFAULT 0
	)`,
	`CREATE TABLE IF NOT EXISTS flashsale_orders (
		product_id INTEGER NOT NULL,
		buyer      TEXT    NOT NULL,
		token      BIGINT  NOT NULL
	)`,
}

// productID is the product on sale.
const productID = 1

// store is the shop's database.
type store struct {
	db    *sql.DB
	desc  string // what to print: which database, no credentials
	close func()
}

// openStore opens the database that --db names: a postgres:// URL, an SQLite file path,
// or "" for a new SQLite file in a temporary directory, removed by close.
func openStore(ctx context.Context, dsn string) (*store, error) {
	s := &store{close: func() {}}
	var err error
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		u, perr := url.Parse(dsn)
		if perr != nil {
			return nil, fmt.Errorf("bad --db URL: %v", redactURL(perr.Error(), dsn))
		}
		s.desc = "PostgreSQL at " + u.Host + u.Path
		s.db, err = sql.Open("pgx", dsn)
	default:
		path := dsn
		if path == "" {
			dir, derr := os.MkdirTemp("", "flashsale-")
			if derr != nil {
				return nil, derr
			}
			s.close = func() { os.RemoveAll(dir) }
			path = filepath.Join(dir, "shop.db")
		}
		s.desc = "SQLite file " + path
		// WAL: readers do not block the writer; busy_timeout: a writer waits for another
		// instead of failing with SQLITE_BUSY.
		s.db, err = sql.Open("sqlite", "file:"+path+
			"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	}
	if err != nil {
		s.close()
		return nil, err
	}
	cleanup := s.close
	s.close = func() { s.db.Close(); cleanup() }
	if err := s.db.PingContext(ctx); err != nil {
		s.close()
		return nil, fmt.Errorf("%s: %v", s.desc, redactURL(err.Error(), dsn))
	}
	for _, q := range schema {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			s.close()
			return nil, fmt.Errorf("%s: create the tables: %w", s.desc, err)
		}
	}
	return s, nil
}

// reset puts stock items on sale and forgets every order.
func (s *store) reset(ctx context.Context, stock int) error {
	for _, q := range []string{`DELETE FROM flashsale_orders`, `DELETE FROM flashsale_products`} {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO flashsale_products (id, name, stock, last_token) VALUES ($1, 'game console', $2, 0)`,
		productID, stock)
	return err
}

// readStock returns the stock of the product.
func (s *store) readStock(ctx context.Context) (int, error) {
	var stock int
	err := s.db.QueryRowContext(ctx, `SELECT stock FROM flashsale_products WHERE id = $1`, productID).Scan(&stock)
	return stock, err
}

// sell takes one item from the stock and records the order: the write of an unfenced
// buyer. It checks nothing: the buyer read the stock before.
func (s *store) sell(ctx context.Context, buyer string) error {
	if _, err := s.db.ExecContext(ctx,
		`UPDATE flashsale_products SET stock = stock - 1 WHERE id = $1`, productID); err != nil {
		return err
	}
	return s.order(ctx, buyer, 0)
}

// fencedUpdate is sell's UPDATE with the fencing check: it writes only if no holder with
// a larger token has written the row before, and records the token.
const fencedUpdate = `UPDATE flashsale_products SET stock = stock - 1, last_token = $1 WHERE id = $2 AND last_token < $1`

// sellFenced is sell for a holder of the lock with the given fencing token. It reports
// whether the database accepted the write; a refused write records no order.
func (s *store) sellFenced(ctx context.Context, buyer string, token uint64) (bool, error) {
	res, err := s.db.ExecContext(ctx, fencedUpdate, int64(token), productID)
	if err != nil {
		return false, err
	}
	n, err := res.RowsAffected()
	if err != nil || n == 0 {
		return false, err
	}
	return true, s.order(ctx, buyer, token)
}

// unfencedWouldWrite runs sell's plain UPDATE in a transaction that it rolls back, and
// reports how many rows it would have changed.
func (s *store) unfencedWouldWrite(ctx context.Context) (int64, error) {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	res, err := tx.ExecContext(ctx, `UPDATE flashsale_products SET stock = stock - 1 WHERE id = $1`, productID)
	if err != nil {
		return 0, err
	}
	return res.RowsAffected()
}

func (s *store) order(ctx context.Context, buyer string, token uint64) error {
	_, err := s.db.ExecContext(ctx,
		`INSERT INTO flashsale_orders (product_id, buyer, token) VALUES ($1, $2, $3)`,
		productID, buyer, int64(token))
	return err
}

// totals returns the orders recorded and the stock left.
func (s *store) totals(ctx context.Context) (sold, left int, err error) {
	if err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM flashsale_orders`).Scan(&sold); err != nil {
		return 0, 0, err
	}
	left, err = s.readStock(ctx)
	return sold, left, err
}

// redactURL replaces the password of rawURL, if any, in msg.
func redactURL(msg, rawURL string) string {
	if u, err := url.Parse(rawURL); err == nil && u.User != nil {
		if pw, ok := u.User.Password(); ok && pw != "" {
			msg = strings.ReplaceAll(msg, pw, "xxxxx")
		}
	}
	return msg
}

// lastToken returns the largest fencing token that has written the product row.
func (s *store) lastToken(ctx context.Context) (uint64, error) {
	var t int64
	err := s.db.QueryRowContext(ctx, `SELECT last_token FROM flashsale_products WHERE id = $1`, productID).Scan(&t)
	return uint64(t), err
}
