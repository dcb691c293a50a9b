package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"

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

func (sf *serverFlags) register(fs *flag.FlagSet) {
	fs.Var(&sf.redis, "redis", "server `URL`; repeat for a quorum")
	fs.BoolVar(&sf.cluster, "cluster", false, "the URLs are seeds of one Redis Cluster")
	sf.tls = tlsFlags{}
	sf.tls.register(fs)
	fs.StringVar(&sf.prefix, "prefix", engine.DefaultPrefix, "key namespace")
	fs.BoolVar(&sf.verbose, "verbose", false, "log what the library does on stderr")
}

// urls returns the server URLs: the --redis flags, else DLOCK_REDIS, else def (which may
// be empty: the demo and the bench then start an embedded Redis).
func (sf *serverFlags) urls(c *cli, def string) []string {
	if len(sf.redis) > 0 {
		return sf.redis
	}
	if env := splitServerList(c.getenv("DLOCK_REDIS")); len(env) > 0 {
		return env
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

// newFlagSet returns a flag set that reports nothing itself: parseArgs does.
func newFlagSet(cmd string) *flag.FlagSet {
	fs := flag.NewFlagSet("dlock "+cmd, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// errHelp asks for the command's help: -h or --help was given.
var errHelp = errors.New("help requested")

// parseArgs parses flags anywhere among the arguments, so that "status NAME --json" works
// as well as "status --json NAME". Arguments after "--" are returned as rest, untouched,
// with dash set. If maxPos >= 0, the first argument beyond maxPos positional ones stops
// parsing: it and everything after it are returned as rest, with dash unset.
func parseArgs(fs *flag.FlagSet, cmd string, args []string, maxPos int) (pos, rest []string, dash bool, err error) {
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case a == "--":
			return pos, args[i+1:], true, nil
		case len(a) > 1 && a[0] == '-':
			chunk := []string{a}
			if name, hasValue := flagName(a); !hasValue {
				if f := fs.Lookup(name); f != nil && !isBool(f) && i+1 < len(args) {
					chunk = append(chunk, args[i+1])
					i++
				}
			}
			if err := fs.Parse(chunk); err != nil {
				if errors.Is(err, flag.ErrHelp) {
					return nil, nil, false, errHelp
				}
				return nil, nil, false, usage(cmd, "%s", strings.TrimPrefix(err.Error(), "flag "))
			}
		case maxPos >= 0 && len(pos) == maxPos:
			return pos, args[i:], false, nil
		default:
			pos = append(pos, a)
		}
	}
	return pos, nil, false, nil
}

// flagName returns the name in "-name", "--name" or "--name=value", and whether a value
// is attached.
func flagName(arg string) (string, bool) {
	name := strings.TrimLeft(arg, "-")
	name, _, hasValue := strings.Cut(name, "=")
	return name, hasValue
}

func isBool(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

// slogDiscard is a logger that logs nothing.
func slogDiscard() *slog.Logger { return slog.New(slog.DiscardHandler) }
