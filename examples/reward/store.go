package main

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"

	_ "modernc.org/sqlite" // database/sql driver "sqlite": SQLite in pure Go
)

// schema has no UNIQUE (family): deliberately, as in the schemas where "once per family"
// is a rule of the code.
const schema = `CREATE TABLE IF NOT EXISTS reward_claims (
	family     TEXT NOT NULL,
	member     TEXT NOT NULL,
	claimed_at TEXT NOT NULL DEFAULT CURRENT_TIMESTAMP
)`

// store is the rewards database.
type store struct {
	db    *sql.DB
	desc  string
	close func()
}

// openStore opens the SQLite file at path, or a new one in a temporary directory that
// close removes when path is "".
func openStore(ctx context.Context, path string) (*store, error) {
	s := &store{close: func() {}}
	if path == "" {
		dir, err := os.MkdirTemp("", "reward-")
		if err != nil {
			return nil, err
		}
		s.close = func() { os.RemoveAll(dir) }
		path = filepath.Join(dir, "rewards.db")
	}
	s.desc = "SQLite file " + path
	db, err := sql.Open("sqlite", "file:"+path+
		"?_pragma=busy_timeout(10000)&_pragma=journal_mode(WAL)&_pragma=synchronous(NORMAL)")
	if err != nil {
		s.close()
		return nil, err
	}
	s.db = db
	cleanup := s.close
	s.close = func() { db.Close(); cleanup() }
	if _, err := db.ExecContext(ctx, schema); err != nil {
		s.close()
		return nil, fmt.Errorf("%s: %w", s.desc, err)
	}
	return s, nil
}

func (s *store) reset(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `DELETE FROM reward_claims`)
	return err
}

// claims returns how many claims the family has.
func (s *store) claims(ctx context.Context, family string) (int, error) {
	var n int
	err := s.db.QueryRowContext(ctx, `SELECT COUNT(*) FROM reward_claims WHERE family = $1`, family).Scan(&n)
	return n, err
}

func (s *store) insertClaim(ctx context.Context, family, member string) error {
	_, err := s.db.ExecContext(ctx, `INSERT INTO reward_claims (family, member) VALUES ($1, $2)`, family, member)
	return err
}

// claimsPerFamily returns the number of claims of every family that has any.
func (s *store) claimsPerFamily(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT family, COUNT(*) FROM reward_claims GROUP BY family`)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var f string
		var n int
		if err := rows.Scan(&f, &n); err != nil {
			return nil, err
		}
		out[f] = n
	}
	return out, rows.Err()
}
