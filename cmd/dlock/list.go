package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"

	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// scanCount is the COUNT hint of each SCAN.
const scanCount = 1000

func cmdList(c *cli, args []string) error {
	ic := new(inspectCmd)
	pattern, err := patternArg(ic.flagSet("list"), "list", args)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	r, err := ic.sf.openReader(ctx, c, "list")
	if err != nil {
		return err
	}
	defer r.Close()
	infos, err := r.list(ctx, pattern)
	if err != nil {
		return err
	}
	if len(infos) == 0 && !ic.json {
		_, err := c.stdout.Write([]byte(noLocksText(r.prefix, pattern) + "\n"))
		return err
	}
	return ic.print(c, r.d, infos)
}

// patternArg parses the command line of list and top: flags, and at most one pattern,
// "*" when none is given.
func patternArg(fs *pflag.FlagSet, cmd string, args []string) (string, error) {
	pos, rest, _, err := parseArgs(fs, cmd, args, -1)
	if err != nil {
		return "", err
	}
	pos = append(pos, rest...)
	switch len(pos) {
	case 0:
		return "*", nil
	case 1:
		return pos[0], nil
	}
	return "", usage(cmd, "give at most one pattern (quote it so that the shell leaves * alone): dlock %s [flags] [PATTERN]", cmd)
}

// noLocksText is what list and top say when no lock matches.
func noLocksText(prefix, pattern string) string {
	return "no locks match " + strconv.Quote(prefix+pattern)
}

// list reads the locks whose names match pattern (see scanNames). Keys whose names no
// dlock lock can have are left out: Inspect would refuse them.
func (r *lockReader) list(ctx context.Context, pattern string) ([]lockInfo, error) {
	names, err := scanNames(ctx, r.d, r.prefix, pattern)
	if err != nil {
		return nil, redisFailure("cannot list the keys", err)
	}
	valid := names[:0]
	for _, name := range names {
		if _, err := keyspace.For(r.prefix, name); err == nil {
			valid = append(valid, name)
		}
	}
	return r.inspect(ctx, valid)
}

// scanNames returns the sorted names of the locks that match prefix+pattern on every node
// (every master of a Cluster), each once, without dlock's companion keys. An RWMutex held
// by readers alone has no lock key: it is found by its readers set, whose key is
// keyspace.ReadersOf(SlotTag(lock)), "{dlock:NAME}:readers" for most names. So besides
// the lock keys it SCANs for the readers of the tag "{"+prefix+pattern+"}" and, unless
// the pattern is "*" (whose SCAN finds those already), of the tag prefix+pattern (the
// names with a hash tag).
func scanNames(ctx context.Context, d *deployment, prefix, pattern string) ([]string, error) {
	match := globEscape(prefix) + pattern
	scans := []scanPass{
		{match: match, locks: true, readers: pattern == "*"},
		{match: keyspace.ReadersOf("{" + match + "}"), readers: true},
	}
	if pattern != "*" {
		scans = append(scans, scanPass{match: keyspace.ReadersOf(match), readers: true})
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	for _, sc := range scans {
		add := func(keys []string) {
			mu.Lock()
			defer mu.Unlock()
			for _, k := range keys {
				lock := k
				if base, _, ok := keyspace.CompanionOf(k); ok {
					if k != keyspace.ReadersOf(base) || !sc.readers {
						continue
					}
					if lock, ok = keyspace.LockOfTag(base, prefix); !ok {
						continue
					}
				} else if !sc.locks {
					continue
				}
				if strings.HasPrefix(lock, prefix) {
					seen[lock[len(prefix):]] = true
				}
			}
		}
		for _, n := range d.nodes {
			var err error
			if cc, ok := n.rdb.(*redis.ClusterClient); ok {
				err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
					return scanNode(ctx, m, sc.match, add)
				})
			} else {
				err = scanNode(ctx, n.rdb, sc.match, add)
			}
			if err != nil {
				return nil, err
			}
		}
	}
	names := make([]string, 0, len(seen))
	for name := range seen {
		if name != "" {
			names = append(names, name)
		}
	}
	slices.Sort(names)
	return names, nil
}

// scanPass is one SCAN of scanNames, and which of the keys it finds name locks.
type scanPass struct {
	match string
	// locks: the keys that are not companions are lock keys that match.
	locks bool
	// readers: the lock of a readers set it finds matches. So for the SCANs of readers
	// keys: their patterns end in the readers suffix, so that the rest of the key, the
	// slot tag, matches exactly; and for the SCAN of the lock keys with the pattern "*".
	readers bool
}

// scanNode SCANs one server for match.
func scanNode(ctx context.Context, rdb redis.Cmdable, match string, add func([]string)) error {
	var cursor uint64
	for {
		keys, next, err := rdb.Scan(ctx, cursor, match, scanCount).Result()
		if err != nil {
			return err
		}
		add(keys)
		if cursor = next; cursor == 0 {
			return nil
		}
	}
}

// globEscape escapes the characters that SCAN MATCH treats as a pattern.
func globEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if strings.ContainsRune(`*?[]\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}
