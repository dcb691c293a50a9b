//go:build linux

package redistest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// faketimeHelp says how to get libfaketime.
const faketimeHelp = "install it with `apt-get install -y libfaketime` (Debian/Ubuntu, as root), " +
	"or set FAKETIME_LIB=/path/to/libfaketime.so.1"

// faketimeGlobs are where distributions put libfaketime.
var faketimeGlobs = []string{
	"/usr/lib/*/faketime/libfaketime.so.1",
	"/usr/lib/faketime/libfaketime.so.1",
	"/usr/local/lib/faketime/libfaketime.so.1",
}

// Clock steps the wall clock of one redis-server started by StartFaketime. Only that
// process sees the step: libfaketime is preloaded into it alone, and its monotonic clock
// is left alone, so that the server's timers keep running while keys expire by the
// stepped wall clock, as after a manual `date -s` or an NTP step on that host.
type Clock struct {
	srv  *Server
	file string // libfaketime's FAKETIME_TIMESTAMP_FILE, re-read on every clock call

	mu     sync.Mutex
	offset time.Duration    // guarded by mu
	pids   map[int]struct{} // guarded by mu: processes whose libfaketime files to remove
}

// StartFaketime starts a standalone server as Start does, with libfaketime preloaded
// into it, and returns it with the Clock that steps its wall clock. It fails the test if
// libfaketime is missing. Stepping uses shared memory that libfaketime removes only when
// the server exits cleanly; the test's cleanup therefore stops the server with SIGTERM
// (by its pid) before Start's cleanup kills it, and removes what a killed server left.
func StartFaketime(tb testing.TB, opts ...Option) (*Server, *Clock) {
	tb.Helper()
	lib, err := faketimeLibrary()
	if err != nil {
		tb.Fatalf("%v", err)
	}
	s := newServer(tb, newConfig(opts), false)
	c := &Clock{srv: s, file: filepath.Join(s.dir, "faketime.rc"), pids: map[int]struct{}{}}
	if err := c.write(0); err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	wrapper, err := writeFaketimeWrapper(s.dir, lib, c.file, s.bin)
	if err != nil {
		tb.Fatalf("redistest: %v", err)
	}
	s.bin = wrapper
	tb.Cleanup(c.stop) // runs before the kill that newServer registered
	if err := s.startFresh(); err != nil {
		tb.Fatalf("%v", err)
	}
	c.track()
	return s, c
}

// faketimeLibrary returns $FAKETIME_LIB or the first libfaketime found in faketimeGlobs.
func faketimeLibrary() (string, error) {
	if p := os.Getenv("FAKETIME_LIB"); p != "" {
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("redistest: FAKETIME_LIB=%q: %v; %s", p, err, faketimeHelp)
		}
		return p, nil
	}
	for _, g := range faketimeGlobs {
		if m, _ := filepath.Glob(g); len(m) > 0 {
			return m[0], nil
		}
	}
	return "", fmt.Errorf("redistest: libfaketime not found in %v; %s", faketimeGlobs, faketimeHelp)
}

// writeFaketimeWrapper writes a shell script that execs redis-server (so the pid stays the
// server's) with libfaketime preloaded. libc comes right after it in LD_PRELOAD, so that
// malloc is glibc's rather than the jemalloc that Debian's redis-server links: jemalloc
// reads the clock while it initialises, libfaketime allocates while it initialises, and
// the two recurse until libfaketime gives up and the server dies at start.
func writeFaketimeWrapper(dir, lib, rcFile, bin string) (string, error) {
	script := "#!/bin/sh\n" +
		"# redistest.StartFaketime: redis-server with its own wall clock.\n" +
		"LD_PRELOAD=" + shellQuote(lib+":libc.so.6") + "\n" +
		"FAKETIME_TIMESTAMP_FILE=" + shellQuote(rcFile) + "\n" +
		"FAKETIME_NO_CACHE=1\n" + // a step applies at once, not after a cache period
		"FAKETIME_DONT_FAKE_MONOTONIC=1\n" +
		"export LD_PRELOAD FAKETIME_TIMESTAMP_FILE FAKETIME_NO_CACHE FAKETIME_DONT_FAKE_MONOTONIC\n" +
		"exec " + shellQuote(bin) + " \"$@\"\n"
	path := filepath.Join(dir, "redis-server-faketime")
	return path, os.WriteFile(path, []byte(script), 0o755)
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// Offset returns how far the server's wall clock has been stepped.
func (c *Clock) Offset() time.Duration {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.offset
}

// Step moves the server's wall clock by d (forward if positive) and returns once the
// server's TIME shows the new offset (within 250ms), failing the test if it does not
// within 2s. Keys with a TTL expire by the stepped clock.
func (c *Clock) Step(tb testing.TB, d time.Duration) {
	tb.Helper()
	c.mu.Lock()
	c.offset += d
	off := c.offset
	err := c.write(off)
	c.mu.Unlock()
	if err != nil {
		tb.Fatalf("redistest: step clock of %s: %v", c.srv.Addr, err)
	}
	c.track()
	if err := c.await(off); err != nil {
		tb.Fatalf("redistest: step clock of %s by %v: %v", c.srv.Addr, d, err)
	}
}

func (c *Clock) write(off time.Duration) error {
	return os.WriteFile(c.file, []byte(fmt.Sprintf("%+.3f\n", off.Seconds())), 0o644)
}

// await polls the server's TIME until it is off away from this process's clock.
func (c *Clock) await(off time.Duration) error {
	rdb := redis.NewClient(c.srv.Options())
	defer rdb.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var last error
	for ctx.Err() == nil {
		before := time.Now()
		t, err := rdb.Time(ctx).Result()
		if err == nil {
			skew := t.Sub(before.Add(off))
			if skew > -250*time.Millisecond && skew < 250*time.Millisecond {
				return nil
			}
			err = fmt.Errorf("server clock is %v off the wanted offset", skew)
		}
		last = err
		time.Sleep(10 * time.Millisecond)
	}
	return last
}

// track records the running server's pid, whose libfaketime files stop removes.
func (c *Clock) track() {
	if pid := c.srv.PID(); pid != 0 {
		c.mu.Lock()
		c.pids[pid] = struct{}{}
		c.mu.Unlock()
	}
}

// stop ends the running server with SIGTERM, so that libfaketime removes its shared
// memory itself, then removes what servers killed earlier (Kill, Restart) left behind.
func (c *Clock) stop() {
	if pid := c.srv.PID(); pid != 0 {
		_ = syscall.Kill(pid, syscall.SIGTERM)
		for deadline := time.Now().Add(5 * time.Second); processAlive(pid) && time.Now().Before(deadline); {
			time.Sleep(5 * time.Millisecond)
		}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for pid := range c.pids {
		os.Remove("/dev/shm/faketime_shm_" + strconv.Itoa(pid))
		os.Remove("/dev/shm/sem.faketime_sem_" + strconv.Itoa(pid))
	}
}
