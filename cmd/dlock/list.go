package main

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/redis/go-redis/v9"

	"github.com/seed51c676c8/dlock/internal/keyspace"
)

// scanCount is the COUNT hint of each SCAN.
const scanCount = 1000

func cmdList(c *cli, args []string) error {
	ic := new(inspectCmd)
	pos, rest, _, err := parseArgs(ic.flagSet("list"), "list", args, -1)
	if err != nil {
		return err
	}
	pos = append(pos, rest...)
	if len(pos) > 1 {
		return usage("list", "give at most one pattern (quote it so that the shell leaves * alone): dlock list [flags] [PATTERN]")
	}
	pattern := "*"
	if len(pos) == 1 {
		pattern = pos[0]
	}
	ctx, cancel := context.WithTimeout(context.Background(), inspectTimeout)
	defer cancel()
	_, d, err := ic.sf.connect(ctx, c, "list")
	if err != nil {
		return err
	}
	defer d.Close()
	names, err := scanNames(ctx, d, ic.sf.prefix, pattern)
	if err != nil {
		return redisFailure("cannot list the keys", err)
	}
	keys := make([]keyspace.Keys, 0, len(names))
	valid := names[:0]
	for _, name := range names {
		if k, err := keyspace.For(ic.sf.prefix, name); err == nil {
			keys, valid = append(keys, k), append(valid, name)
		}
	}
	infos, err := inspectAll(ctx, d, valid, keys)
	if err != nil {
		return err
	}
	if len(infos) == 0 && !ic.json {
		_, err := c.stdout.Write([]byte("no locks match " + strconv.Quote(ic.sf.prefix+pattern) + "\n"))
		return err
	}
	return ic.print(c, d, infos)
}

// scanNames returns the sorted names of the locks that match prefix+pattern on every node
// (every master of a Cluster), each once, without dlock's companion keys. An RWMutex held
// by readers alone has no lock key: it is found by its readers set, whose key is
// SlotTag(lock)+":readers", "{dlock:NAME}:readers" for most names. So besides the lock
// keys it SCANs for "{"+prefix+pattern+"}:readers" and, unless the pattern is "*" (whose
// SCAN finds those already), for prefix+pattern+":readers" (the names with a hash tag).
func scanNames(ctx context.Context, d *deployment, prefix, pattern string) ([]string, error) {
	match := globEscape(prefix) + pattern
	scans := []scanPass{
		{match: match, locks: true, readers: pattern == "*"},
		{match: "{" + match + "}:readers", readers: true},
	}
	if pattern != "*" {
		scans = append(scans, scanPass{match: match + ":readers", readers: true})
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	for _, sc := range scans {
		add := func(keys []string) {
			mu.Lock()
			defer mu.Unlock()
			for _, k := range keys {
				lock := k
				if base, suffix, ok := companionOf(k); ok {
					if suffix != ":readers" || !sc.readers {
						continue
					}
					if lock, ok = lockOfTag(base, prefix); !ok {
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
	// keys: their patterns end in ":readers", so that the rest of the key, the slot tag,
	// matches exactly; and for the SCAN of the lock keys with the pattern "*".
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

// companionSuffixes end the keys that belong to a lock without being its lock key
// (keyspace.Keys.Fence and Aux): the fencing counter, a FairMutex's or a Semaphore's
// queue, an RWMutex's readers and writers, a Semaphore's permits, a Mutex's turn list
// and standing requests (keyspace.Keys.Turns, Asks). A kind that adds
// companion keys adds their suffixes here. The FairMutex waiters' channels,
// Aux("granted:")+token, are matched by grantedInfix.
var companionSuffixes = []string{":fence", ":queue", ":queue:deadlines", ":readers", ":writers", ":permits", ":turns", ":asks"}

const grantedInfix = ":granted:"

// companionOf reports whether key is a companion of some lock key, and splits it into
// the lock's slot tag and the suffix (":granted:" for a waiter's channel name). keyspace
// names companions SlotTag(lock)+suffix, and SlotTag always has a hash tag.
func companionOf(key string) (tag, suffix string, ok bool) {
	isTag := func(base string) bool {
		t, err := keyspace.SlotTag(base)
		return err == nil && t == base
	}
	for _, suffix := range companionSuffixes {
		if base, ok := strings.CutSuffix(key, suffix); ok && isTag(base) {
			return base, suffix, true
		}
	}
	for i := 0; ; {
		j := strings.Index(key[i:], grantedInfix)
		if j < 0 {
			return "", "", false
		}
		if base := key[:i+j]; isTag(base) {
			return base, grantedInfix, true
		}
		i += j + 1
	}
}

// lockOfTag returns the lock key under prefix whose slot tag is tag: tag without its
// braces ("{dlock:x}" for "dlock:x"), or tag itself when the name has a hash tag.
func lockOfTag(tag, prefix string) (string, bool) {
	if inner, ok := strings.CutPrefix(tag, "{"); ok {
		if inner, ok = strings.CutSuffix(inner, "}"); ok && strings.HasPrefix(inner, prefix) {
			if t, err := keyspace.SlotTag(inner); err == nil && t == tag {
				return inner, true
			}
		}
	}
	if strings.HasPrefix(tag, prefix) {
		if t, err := keyspace.SlotTag(tag); err == nil && t == tag {
			return tag, true
		}
	}
	return "", false
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
