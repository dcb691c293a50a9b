package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/seed51c676c8/dlock/internal/engine"
)

// serverFlags are the flags every command that talks to Redis takes.
type serverFlags struct {
	redis   stringList
	cluster bool
	tls     tlsFlags
	prefix  string
	verbose bool
}

func (sf *serverFlags) register(fs *pflag.FlagSet) {
	fs.VarP(&sf.redis, "redis", "r", "server `URL`; repeat for a quorum")
	fs.BoolVarP(&sf.cluster, "cluster", "c", false, "the URLs are seeds of one Redis Cluster")
	sf.tls = tlsFlags{}
	sf.tls.register(fs)
	fs.StringVarP(&sf.prefix, "prefix", "p", engine.DefaultPrefix, "key namespace")
	fs.BoolVarP(&sf.verbose, "verbose", "v", false, "log what the library does on stderr")
}

// urls returns the server URLs: the --redis flags, else DLOCK_REDIS, else REDIS_URL (one
// URL, as other programs read it: a comma in it is not a separator), else def (which may
// be empty: the demo and the bench then start an embedded Redis).
func (sf *serverFlags) urls(c *cli, def string) []string {
	if len(sf.redis) > 0 {
		return sf.redis
	}
	if env := splitServerList(c.getenv("DLOCK_REDIS")); len(env) > 0 {
		return env
	}
	if u := strings.TrimSpace(c.getenv("REDIS_URL")); u != "" {
		return []string{u}
	}
	if def == "" {
		return nil
	}
	return []string{def}
}

// servers parses the server URLs; a bad one is a usage error.
func (sf *serverFlags) servers(c *cli, cmd string) (*servers, error) {
	if sf.verbose {
		redis.SetLogger(redisLogger{w: c.stderr})
	}
	s, err := parseServers(sf.urls(c, defaultServer), sf.cluster, sf.tls, c.red)
	if err != nil {
		return nil, usage(cmd, "%v", err)
	}
	return s, nil
}

// logger is where the library logs: stderr (scrubbed) with --verbose, nowhere otherwise.
func (sf *serverFlags) logger(c *cli) *slog.Logger {
	if !sf.verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(c.stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// redisLogger receives go-redis's own log (dial failures, pool events), which would
// otherwise go to stderr unscrubbed: cli.main discards it, and --verbose sends it to
// stderr through the redactor.
type redisLogger struct{ w io.Writer }

func (l redisLogger) Printf(_ context.Context, format string, args ...any) {
	if l.w != nil {
		fmt.Fprintf(l.w, "redis: "+format+"\n", args...)
	}
}

// stringList is a repeatable string flag.
type stringList []string

func (l *stringList) String() string { return strings.Join(*l, ",") }
func (l *stringList) Type() string   { return "URL" }
func (l *stringList) Set(s string) error {
	if s == "" {
		return errors.New("empty value")
	}
	*l = append(*l, s)
	return nil
}

// waitFlag is --wait: a duration, or "forever".
type waitFlag struct {
	d       time.Duration
	forever bool
}

func (w *waitFlag) String() string {
	if w.forever {
		return "forever"
	}
	return w.d.String()
}

func (w *waitFlag) Type() string { return "duration" }

func (w *waitFlag) Set(s string) error {
	if s == "forever" || s == "inf" {
		w.forever, w.d = true, 0
		return nil
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return errors.New(`want a duration such as 0, 500ms, 30s or 2m, or "forever"`)
	}
	if d < 0 {
		return errors.New(`a negative wait makes no sense: use 0 not to wait, or "forever"`)
	}
	w.forever, w.d = false, d
	return nil
}

// Flags go through spf13/pflag for the GNU syntax (long and short forms, --flag=value,
// errors that name the flag as typed). Not cobra: what it adds is a command tree, help
// and usage generated from the flags, which dlock has already as a table (main.go) and
// hand-written help (help.go), a reference that README.md copies.

// newFlagSet returns a flag set that reports nothing itself: parseArgs does.
func newFlagSet(cmd string) *pflag.FlagSet {
	fs := pflag.NewFlagSet("dlock "+cmd, pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	fs.SortFlags = false
	return fs
}

// errHelp asks for the command's help: -h or --help was given.
var errHelp = errors.New("help requested")

// parseArgs parses flags anywhere among the arguments, so that "status NAME --json" works
// as well as "status --json NAME". Arguments after "--" are returned as rest, untouched,
// with dash set. If maxPos >= 0, the first argument beyond maxPos positional ones stops
// parsing: it and everything after it are returned as rest, with dash unset (so that in
// "run NAME CMD -x" the -x is CMD's, not an unknown flag of dlock's).
//
// pflag stops at each positional argument (interspersed parsing off), so that parseArgs
// can count them; it is then called again on what follows.
func parseArgs(fs *pflag.FlagSet, cmd string, args []string, maxPos int) (pos, rest []string, dash bool, err error) {
	fs.SetInterspersed(false)
	for {
		if err := fs.Parse(singleDashLong(fs, args)); err != nil {
			if errors.Is(err, pflag.ErrHelp) {
				return nil, nil, false, errHelp
			}
			return nil, nil, false, usage(cmd, "%v", err)
		}
		args = fs.Args()
		switch {
		case fs.ArgsLenAtDash() == 0:
			return pos, args, true, nil
		case len(args) == 0:
			return pos, nil, false, nil
		case maxPos >= 0 && len(pos) == maxPos:
			return pos, args, false, nil
		}
		pos, args = append(pos, args[0]), args[1:]
	}
}

// singleDashLong rewrites "-name" and "-name=value" as "--name..." when name is a long
// flag of fs (two letters or more), up to the first argument that is not a flag: dlock
// parsed Go's flag syntax before pflag's, and command lines written then ("-wait 5s")
// keep working. A long name is never also a cluster of short flags: "-wait" is --wait,
// not -w with the value "ait". Values of flags are skipped, so "--prefix -json" keeps its
// value.
func singleDashLong(fs *pflag.FlagSet, args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); i++ {
		a := out[i]
		if len(a) < 2 || a[0] != '-' || a == "--" {
			break
		}
		if name, _, _ := strings.Cut(a[1:], "="); a[1] != '-' && len(name) > 1 && fs.Lookup(name) != nil {
			a = "-" + a
			out[i] = a
		}
		if takesNext(fs, a) {
			i++
		}
	}
	return out
}

// takesNext reports whether the flag argument a takes the next argument as its value:
// a long flag or a last short flag of a cluster that needs a value and has none attached.
func takesNext(fs *pflag.FlagSet, a string) bool {
	if strings.HasPrefix(a, "--") {
		f := fs.Lookup(a[2:])
		return f != nil && f.NoOptDefVal == ""
	}
	shorts := a[1:]
	for i := range len(shorts) {
		f := fs.ShorthandLookup(shorts[i : i+1])
		switch {
		case f == nil:
			return false // pflag reports it
		case f.NoOptDefVal == "":
			return i == len(shorts)-1 // else the rest of the cluster is its value
		}
	}
	return false
}

// slogDiscard is a logger that logs nothing.
func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }
