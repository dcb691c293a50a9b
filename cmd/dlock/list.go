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

// scanNames returns the sorted names of the keys that match prefix+pattern on every node
// (every master of a Cluster), without dlock's companion keys.
func scanNames(ctx context.Context, d *deployment, prefix, pattern string) ([]string, error) {
	match := globEscape(prefix) + pattern
	var mu sync.Mutex
	seen := map[string]bool{}
	add := func(keys []string) {
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			if !isCompanionKey(k) && strings.HasPrefix(k, prefix) {
				seen[k[len(prefix):]] = true
			}
		}
	}
	for _, n := range d.nodes {
		var err error
		if cc, ok := n.rdb.(*redis.ClusterClient); ok {
			err = cc.ForEachMaster(ctx, func(ctx context.Context, m *redis.Client) error {
				return scanNode(ctx, m, match, add)
			})
		} else {
			err = scanNode(ctx, n.rdb, match, add)
		}
		if err != nil {
			return nil, err
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
// queue, an RWMutex's readers and writers, a Semaphore's permits. A kind that adds
// companion keys adds their suffixes here.
var companionSuffixes = []string{":fence", ":queue", ":queue:deadlines", ":readers", ":writers", ":permits"}

// isCompanionKey reports whether key is a companion of some lock key: keyspace names them
// SlotTag(lock)+suffix, and SlotTag always has a hash tag.
func isCompanionKey(key string) bool {
	for _, suffix := range companionSuffixes {
		base, ok := strings.CutSuffix(key, suffix)
		if !ok {
			continue
		}
		if tag, err := keyspace.SlotTag(base); err == nil && tag == base {
			return true
		}
	}
	return false
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
