package main

import (
	"context"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// topLocks holds, on rdb, a lock of every kind and waits for some, from the test process;
// the test's cleanup lets them go. In top's order:
//
//	hot       a FairMutex with 3 waiters queued
//	warm      a FairMutex with 1 waiter
//	expiring  a key that expires in 20s (a mutex whose holder is gone)
//	sem       a Semaphore: 2 holders, 3 permits, 30s leases
//	readers   an RWMutex held by 2 readers, 40s leases
//	mutex     a Mutex, 50s lease
//	forever   a key without expiry
func topLocks(t *testing.T, rdb *redis.Client) []string {
	t.Helper()
	ctx := context.Background()
	holders, waiters := newLib(t, rdb), newLib(t, rdb)
	for name, n := range map[string]int64{"hot": 3, "warm": 1} {
		holders.now(holders.c.FairMutex(name, dlock.TTL(60*time.Second)).Lock)
		for range n {
			waiters.lock(waiters.c.FairMutex(name).Lock)
		}
		waitLen(t, rdb, keysOf(name).Queue(), n)
	}
	sem := holders.c.Semaphore("sem", 5, dlock.TTL(30*time.Second))
	for _, n := range []int64{2, 1} {
		holders.now(func(ctx context.Context) (*dlock.Lease, error) { return sem.Acquire(ctx, n) })
	}
	rw := holders.c.RWMutex("readers", dlock.TTL(40*time.Second))
	holders.now(rw.RLock)
	holders.now(rw.RLock)
	holders.now(holders.c.Mutex("mutex", dlock.TTL(50*time.Second)).Lock)
	rdb.Set(ctx, "dlock:forever", "tok-forever", 0)
	rdb.Set(ctx, "dlock:expiring", "tok-expiring", 20*time.Second)
	return []string{"hot", "warm", "expiring", "sem", "readers", "mutex", "forever"}
}

// topTable is the table of a view of top: its header, and each row by name.
type topTable struct {
	header string
	names  []string
	rows   map[string]string
}

// parseTop reads the table out of a view (a screen of the terminal, or --once's output).
func parseTop(view string) (topTable, bool) {
	lines := strings.Split(view, "\n")
	i := slices.IndexFunc(lines, func(l string) bool { return strings.HasPrefix(l, "NAME ") })
	if i < 0 {
		return topTable{}, false
	}
	tt := topTable{header: lines[i], rows: map[string]string{}}
	for _, l := range lines[i+1:] {
		if f := strings.Fields(l); len(f) > 1 {
			tt.names = append(tt.names, f[0])
			tt.rows[f[0]] = l
		}
	}
	return tt, true
}

// cell is the value of row name in column col ("" when there is no such row).
func (tt topTable) cell(name, col string) string {
	row, i := tt.rows[name], strings.Index(tt.header, col)
	if row == "" || i < 0 || i >= len(row) {
		return ""
	}
	next := len(row)
	if j := strings.IndexFunc(tt.header[i+len(col):], func(r rune) bool { return r != ' ' }); j >= 0 {
		next = min(len(row), i+len(col)+j)
	}
	return strings.TrimSpace(row[i:next])
}

// TestTopOnce: top's view without a terminal (--once, or stdout a pipe) shows every kind
// of lock, the most waited for first, then the hold that ends soonest; a pattern narrows
// it.
func TestTopOnce(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	env := []string{"DLOCK_REDIS=" + serverURL(srv)}
	all := topLocks(t, srv.Client(t))
	tests := []struct {
		name string
		args []string
		want []string // the rows, in order
	}{
		{"--once", []string{"top", "--once"}, all},
		{"stdout a pipe", []string{"top"}, all},
		{"a pattern", []string{"top", "--once", "*e*"}, []string{"expiring", "sem", "readers", "mutex", "forever"}},
		{"flags after the pattern", []string{"top", "h*", "--interval", "2s"}, []string{"hot"}},
		{"no match", []string{"top", "zz*"}, nil},
	}
	// In sequence: parallel subtests would wait for the other tests, and the key expire.
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := runBin(t, env, tt.args...)
			expect(t, r, 0, "dlock top: "+srv.Addr, plural(int64(len(tt.want)), "lock"))
			if strings.Contains(r.stdout, "\x1b") {
				t.Fatalf("control codes in a view without a terminal: %q", r.stdout)
			}
			table, _ := parseTop(r.stdout)
			if !slices.Equal(table.names, tt.want) {
				t.Fatalf("rows %q, want %q\n%v", table.names, tt.want, r)
			}
			if tt.want == nil {
				expect(t, r, 0, `no locks match "dlock:zz*"`)
			}
		})
	}

	r := runBin(t, env, "top", "--once")
	table, _ := parseTop(r.stdout)
	for _, c := range []struct{ name, col, want string }{
		{"hot", "KIND", "fair"}, {"hot", "WAITERS", "3"},
		{"warm", "KIND", "fair"}, {"warm", "WAITERS", "1"},
		{"expiring", "KIND", "mutex"}, {"expiring", "HOLDER", "tok-expiring"},
		{"sem", "KIND", "semaphore"}, {"sem", "DETAIL", "in use 3 by 2 holders"},
		{"readers", "KIND", "rw"}, {"readers", "DETAIL", "read, 2 readers"},
		{"mutex", "KIND", "mutex"}, {"mutex", "WAITERS", "0"},
		{"forever", "TTL", "no expiry"},
	} {
		if got := table.cell(c.name, c.col); got != c.want {
			t.Errorf("%s of %s: %q, want %q\n%s", c.col, c.name, got, c.want, r.stdout)
		}
	}
	if d, err := time.ParseDuration(table.cell("expiring", "TTL")); err != nil || d <= 0 || d > 20*time.Second {
		t.Errorf("TTL of the expiring lock: %q, want at most 20s", table.cell("expiring", "TTL"))
	}
}

// TestTopQuorum: on a quorum, top shows a row per server, and the rows of a lock stay
// together.
func TestTopQuorum(t *testing.T) {
	t.Parallel()
	nodes := redistest.StartNodes(t, 3)
	var urls []string
	for i, n := range nodes {
		urls = append(urls, "--redis", serverURL(n))
		n.Client(t).Set(context.Background(), "dlock:a", "tok", time.Minute)
		if i < 2 {
			n.Client(t).Set(context.Background(), "dlock:b", "tok", 10*time.Second)
		}
	}
	r := runBin(t, nil, append([]string{"top", "--once"}, urls...)...)
	expect(t, r, 0, "NODE", nodes[0].Addr+", "+nodes[1].Addr+", "+nodes[2].Addr, "2 locks")
	var order []string
	for _, l := range strings.Split(r.stdout, "\n")[2:] {
		if f := strings.Fields(l); len(f) > 1 {
			order = append(order, f[0]+"@"+f[1])
		}
	}
	want := []string{"b@" + nodes[0].Addr, "b@" + nodes[1].Addr, "b@" + nodes[2].Addr, "a@" + nodes[0].Addr, "a@" + nodes[1].Addr, "a@" + nodes[2].Addr}
	if !slices.Equal(order, want) {
		t.Fatalf("rows %q, want %q\n%v", order, want, r)
	}
}

// TestTopLayout: a table wider than the terminal gives up HOLDER's width (keeping its
// start), then NAME's (keeping its start and end), and is then cut; rows that do not fit are counted.
func TestTopLayout(t *testing.T) {
	t.Parallel()
	cells := [][]string{
		{"NAME", "KIND", "HOLDER", "FENCE"},
		{"a-rather-long-lock-name", "mutex", "0123456789abcdef0123456789abcdef", "7"},
	}
	for _, tt := range []struct {
		width int
		want  string
	}{
		{0, "a-rather-long-lock-name  mutex  0123456789abcdef0123456789abcdef  7"},
		{60, "a-rather-long-lock-name  mutex  0123456789abcdef0123…  7"},
		{40, "a-rathe…ock-name  mutex  0123456…  7"},
		{31, "a-rat…k-name  mutex  0123456… …"},
	} {
		lines := layoutTable(cells, tt.width)
		if tt.width > 0 {
			for i := range lines {
				lines[i] = truncate(lines[i], tt.width)
			}
		}
		if strings.TrimRight(lines[1], " ") != tt.want {
			t.Errorf("width %d: %q, want %q", tt.width, lines[1], tt.want)
		}
	}
	table := []string{"NAME", "a", "b", "c", "d"}
	if got := fitHeight(table, 4); !slices.Equal(got, []string{"NAME", "a", "b", "+2 more"}) {
		t.Errorf("4 lines: %q", got)
	}
	if got := fitHeight(table, 5); !slices.Equal(got, table) {
		t.Errorf("5 lines: %q", got)
	}
	if got := printable("a\x1b[2Jb\tc"); got != "a?[2Jb?c" {
		t.Errorf("printable: %q", got)
	}
}

// TestTableCellsPrintable: the table of status, list and top shows a key name's control
// characters as '?' (they would move the terminal's cursor), with quorum's NODE column too.
func TestTableCellsPrintable(t *testing.T) {
	t.Parallel()
	infos := []lockInfo{
		{Name: "job\x1b[2J", Node: "n1", Kind: dlock.KindMutex, Holder: "t1", Owner: "web\x07-1:42", Waiters: 2},
		{Name: "job\x1b[2J", Node: "n2", Kind: dlock.KindMutex},
	}
	for _, d := range []*deployment{{nodes: make([]node, 1)}, {nodes: make([]node, 3)}} {
		cells := tableCells(infos, new(redactor), d.quorum())
		if len(cells) != 3 || len(cells[0]) != len(tableHeader(d.quorum())) {
			t.Fatalf("%d nodes: cells %q", len(d.nodes), cells)
		}
		if cells[1][0] != "job?[2J" {
			t.Errorf("%d nodes: name cell %q, want its control character replaced", len(d.nodes), cells[1][0])
		}
		if owner := cells[1][slices.Index(cells[0], "OWNER")]; owner != "web?-1:42" {
			t.Errorf("%d nodes: owner cell %q, want its control character replaced", len(d.nodes), owner)
		}
	}
}
