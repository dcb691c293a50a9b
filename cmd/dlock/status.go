package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// inspectTimeout bounds the requests of status, list and unlock.
const inspectTimeout = 30 * time.Second

// inspectCmd holds the flags of 'dlock status' and 'dlock list'.
type inspectCmd struct {
	sf   serverFlags
	json bool
}

func (ic *inspectCmd) flagSet(cmd string) *flag.FlagSet {
	fs := newFlagSet(cmd)
	ic.sf.register(fs)
	fs.BoolVar(&ic.json, "json", false, "print JSON")
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
	_, d, err := ic.sf.connect(ctx, c, "status")
	if err != nil {
		return err
	}
	defer d.Close()
	infos, err := inspectAll(ctx, d, ic.sf.prefix, names)
	if err != nil {
		return err
	}
	return ic.print(c, d, infos)
}

// inspectAll reads every lock on every node, through a dlock Client on d.
func inspectAll(ctx context.Context, d *deployment, prefix string, names []string) ([]lockInfo, error) {
	c, err := d.client(prefix, slog.New(slog.DiscardHandler))
	if err != nil {
		return nil, err
	}
	defer c.Close()
	var infos []lockInfo
	for _, name := range names {
		rows, err := inspectLock(ctx, d, c, name)
		if err != nil {
			return nil, err
		}
		infos = append(infos, rows...)
	}
	return infos, nil
}

// print writes infos as a table, or as a JSON array with --json. The cells are scrubbed
// before the table is laid out, so that a masked secret does not break its columns.
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
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	header := []string{"NAME", "KIND", "HOLDER", "FENCE", "TTL", "WAITERS", "DETAIL"}
	if d.quorum() {
		header = append([]string{"NAME", "NODE"}, header[1:]...)
	}
	fmt.Fprintln(tw, strings.Join(header, "\t"))
	for _, in := range infos {
		row := []string{in.Name, dash(in.Kind), dash(in.Holder), fenceText(in.Fence), ttlText(in.TTLms), strconv.FormatInt(in.Waiters, 10), dash(in.detail())}
		if d.quorum() {
			row = append([]string{in.Name, in.Node}, row[1:]...)
		}
		for i := range row {
			row[i] = c.red.String(row[i])
		}
		fmt.Fprintln(tw, strings.Join(row, "\t"))
	}
	return tw.Flush()
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
