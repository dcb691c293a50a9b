package testsrv

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx"
)

// pgInstallHint says how to get the PostgreSQL server binaries.
const pgInstallHint = "install them with `apt-get install -y postgresql` (Debian/Ubuntu, as root; `make deps` does it) " +
	"or `brew install postgresql` (macOS); or set PG_BIN to the directory that holds initdb and postgres"

// Postgres starts a PostgreSQL server (a fresh cluster made by initdb, trust
// authentication, no fsync) on a free loopback port and returns its URL,
// postgres://postgres@127.0.0.1:PORT/postgres?sslmode=disable. It is stopped and its
// directory removed when the test ends. PostgreSQL refuses to run as root: as root, it
// runs as the user "postgres", which Debian's package creates.
func Postgres(tb testing.TB) string {
	tb.Helper()
	bin, err := pgBinDir()
	if err != nil {
		tb.Fatalf("testsrv: %v; %s", err, pgInstallHint)
	}
	cred, err := pgCredential()
	if err != nil {
		tb.Fatalf("testsrv: %v", err)
	}
	// Not tb.TempDir: its parent is private to the test's user, and the server may run as
	// another one.
	dir, err := os.MkdirTemp("", "dlock-examples-pg-")
	if err != nil {
		tb.Fatalf("testsrv: %v", err)
	}
	tb.Cleanup(func() { os.RemoveAll(dir) })
	if cred != nil {
		if err := os.Chown(dir, int(cred.Uid), int(cred.Gid)); err != nil {
			tb.Fatalf("testsrv: %v", err)
		}
	}
	data := filepath.Join(dir, "data")
	initdb := exec.Command(filepath.Join(bin, "initdb"), "-D", data, "-U", "postgres", "-A", "trust",
		"-E", "UTF8", "--locale=C", "--no-sync")
	initdb.Dir = dir
	initdb.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
	if out, err := initdb.CombinedOutput(); err != nil {
		tb.Fatalf("testsrv: initdb: %v\n%s", err, out)
	}

	logPath := filepath.Join(dir, "postgres.log")
	for range 5 {
		port, err := freePort()
		if err != nil {
			tb.Fatalf("testsrv: %v", err)
		}
		cmd := exec.Command(filepath.Join(bin, "postgres"), "-D", data, "-p", strconv.Itoa(port),
			"-c", "listen_addresses=127.0.0.1", "-c", "unix_socket_directories=",
			"-c", "fsync=off", "-c", "synchronous_commit=off", "-c", "full_page_writes=off")
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: cred}
		p, err := start(cmd, logPath)
		if err != nil {
			tb.Fatalf("testsrv: start postgres: %v", err)
		}
		url := fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable", port)
		err = p.waitReady(30*time.Second, func() error { return pgPing(url) })
		if err == nil {
			tb.Cleanup(func() { p.stop(syscall.SIGINT, 10*time.Second) }) // fast shutdown
			return url
		}
		p.stop(syscall.SIGKILL, 0)
		if !errors.Is(err, errExited) {
			tb.Fatalf("testsrv: postgres on port %d: %v\n%s", port, err, tail(logPath))
		}
	}
	tb.Fatalf("testsrv: postgres exited early 5 times:\n%s", tail(logPath))
	return ""
}

func pgPing(url string) error {
	db, err := sql.Open("pgx", url)
	if err != nil {
		return err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	return db.PingContext(ctx)
}

// pgBinDir finds the directory of initdb and postgres: $PG_BIN, else PATH, else the
// newest /usr/lib/postgresql/VERSION/bin (Debian keeps them off PATH).
func pgBinDir() (string, error) {
	has := func(dir string) bool {
		for _, name := range []string{"initdb", "postgres"} {
			if fi, err := os.Stat(filepath.Join(dir, name)); err != nil || fi.IsDir() {
				return false
			}
		}
		return true
	}
	if dir := os.Getenv("PG_BIN"); dir != "" {
		if !has(dir) {
			return "", fmt.Errorf("PG_BIN=%q holds no initdb and postgres", dir)
		}
		return dir, nil
	}
	if p, err := exec.LookPath("initdb"); err == nil {
		if real, err := filepath.EvalSymlinks(p); err == nil && has(filepath.Dir(real)) {
			return filepath.Dir(real), nil // postgres finds its share/ and lib/ from there
		}
		if has(filepath.Dir(p)) {
			return filepath.Dir(p), nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	version := func(dir string) int {
		v, _ := strconv.Atoi(filepath.Base(filepath.Dir(dir)))
		return v
	}
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, dir := range dirs {
		if has(dir) {
			return dir, nil
		}
	}
	return "", errors.New("the PostgreSQL server (initdb, postgres) was not found on PATH nor in /usr/lib/postgresql/*/bin")
}

// pgCredential returns whom to run the server as: nil (ourselves) unless we are root,
// which PostgreSQL refuses; then the user "postgres".
func pgCredential() (*syscall.Credential, error) {
	if os.Geteuid() != 0 {
		return nil, nil
	}
	u, err := user.Lookup("postgres")
	if err != nil {
		return nil, fmt.Errorf("PostgreSQL refuses to run as root, and there is no user %q to run it as (%v): "+
			"`apt-get install -y postgresql` creates it, or run the tests as an unprivileged user", "postgres", err)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err := errors.Join(err1, err2); err != nil {
		return nil, fmt.Errorf("user postgres: %v", err)
	}
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{}}, nil
}
