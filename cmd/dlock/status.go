package main

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"

	"github.com/spf13/pflag"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// inspectTimeout bounds the requests of status, list and unlock.
const inspectTimeout = 30 * time.Second

// inspectCmd holds the flags of 'dlock status' and 'dlock list'.
type inspectCmd struct {
	sf   serverFlags
	json bool
}

func (ic *inspectCmd) flagSet(cmd string) *pflag.FlagSet {
	fs := newFlagSet(cmd)
	ic.sf.register(fs)
	fs.BoolVarP(&ic.json, "json", "j", false, "print JSON")
	return fs
}

func cmdStatus(c *cli, args []string) error {
	ic := new(inspectCmd)
	pos, rest, _, err := parseArgs(ic.flagSet("status"), "status", args, -1)
	if err != nil {
		return err
	}
	names := append(pos, rest...)
	if len(names) == 0 {
		return usage("status", "give the names of the locks: dlock status [flags] NAME...")
	}
	for _, name := range names {
		if _, err = keyspace.For(ic.sf.prefix, name); err != nil {
			return usage("status", "%v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	r, err := ic.sf.openReader(ctx, c, "status")
	if err != nil {
		return err
	}
	defer r.Close()
	infos, err := r.inspect(ctx, names)
	if err != nil {
		return err
	}
	return ic.print(c, r.d, infos)
}

// lockReader reads locks, for status, list and top: one dlock Client on the deployment,
// kept for as long as top refreshes.
type lockReader struct {
	d      *deployment
	c      *dlock.Client
	prefix string
}

// openReader connects to the servers (a failure is the command's error) and returns a
// lockReader on them.
func (sf *serverFlags) openReader(ctx context.Context, c *cli, cmd string) (*lockReader, error) {
	d, dc, err := sf.openClient(ctx, c, cmd, slogDiscard())
	if err != nil {
		return nil, err
	}
	return &lockReader{d: d, c: dc, prefix: sf.prefix}, nil
}

// openClient connects to the servers (a failure is the command's error) and returns a
// Client on them that logs to log; closing it leaves the deployment to close.
func (sf *serverFlags) openClient(ctx context.Context, c *cli, cmd string, log *slog.Logger) (*deployment, *dlock.Client, error) {
	_, d, err := sf.connect(ctx, c, cmd)
	if err != nil {
		return nil, nil, err
	}
	dc, err := d.client(sf.prefix, log)
	if err != nil {
		d.Close()
		return nil, nil, err
	}
	return d, dc, nil
}

// Close closes the Client, then the Redis clients it used.
func (r *lockReader) Close() {
	_ = r.c.Close()
	r.d.Close()
}

// inspect reads every lock on every node.
func (r *lockReader) inspect(ctx context.Context, names []string) ([]lockInfo, error) {
	var infos []lockInfo
	for _, name := range names {
		rows, err := inspectLock(ctx, r.d, r.c, name)
		if err != nil {
			return nil, err
		}
		infos = append(infos, rows...)
	}
	return infos, nil
}

// print writes infos as a table, or as a JSON array with --json.
func (ic *inspectCmd) print(c *cli, d *deployment, infos []lockInfo) error {
	w := c.stdout
	if ic.json {
		if infos == nil {
			infos = []lockInfo{}
		}
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(infos)
	}
	cells := tableCells(infos, c.red, d.quorum())
	_, err := io.WriteString(w, strings.Join(layoutTable(cells, 0), "\n")+"\n")
	return err
}

// tableCells are the table of status, list and top: the header, then each row's cells.
func tableCells(infos []lockInfo, red *redactor, quorum bool) [][]string {
	cells := [][]string{tableHeader(quorum)}
	for _, in := range infos {
		cells = append(cells, in.cells(red, quorum))
	}
	return cells
}

// tableHeader is the header of the table of status, list and top.
func tableHeader(quorum bool) []string {
	header := []string{"NAME", "KIND", "HOLDER", "OWNER", "FENCE", "TTL", "WAITERS", "DETAIL"}
	if quorum {
		header = slices.Insert(header, 1, "NODE")
	}
	return header
}

// cells is the row of in under tableHeader. They are scrubbed one by one, before a table
// is laid out, so that a masked secret does not break its columns, and made printable: a
// key name, or an owner label another program wrote, may hold control characters that
// would move the terminal's cursor or change its colours (--json keeps them, escaped).
func (in lockInfo) cells(red *redactor, quorum bool) []string {
	row := []string{in.Name, dash(in.Kind), dash(in.Holder), dash(in.Owner), fenceText(in.Fence), ttlText(in.TTLms), strconv.FormatInt(in.Waiters, 10), dash(in.detail())}
	if quorum {
		row = slices.Insert(row, 1, in.Node)
	}
	for i := range row {
		row[i] = printable(red.String(row[i]))
	}
	return row
}

// printable replaces control characters (C0, DEL and C1) with '?'.
func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func fenceText(f uint64) string {
	if f == 0 {
		return "-"
	}
	return strconv.FormatUint(f, 10)
}

func ttlText(ms *int64) string {
	switch {
	case ms == nil:
		return "-"
	case *ms == -1:
		return "no expiry"
	case *ms < 0:
		return "-"
	}
	return roundDuration(time.Duration(*ms) * time.Millisecond).String()
}
