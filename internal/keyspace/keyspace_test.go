package keyspace

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
	"go.uber.org/goleak"

	"github.com/seed51c676c8/dlock/internal/redistest"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestSlotKnownValues(t *testing.T) {
	t.Parallel()
	// Well-known values from the Redis documentation and from CLUSTER KEYSLOT on Redis 7.
	for key, want := range map[string]int{
		"foo":                  12182,
		"bar":                  5061,
		"hello":                866,
		"123456789":            12739, // the CRC16-XMODEM check value 0x31C3, mod 16384
		"{user1000}.following": 3443,
		"":                     0,
		"{}":                   15257, // empty tag: the whole key is hashed
		"a{}b":                 13694,
		"{a}{b}":               15495, // only the first tag counts
		"a{b":                  13340,
		"{{x}}":                11068, // tag is "{x"
		"\xff\x00":             1023,
	} {
		if got := Slot(key); got != want {
			t.Errorf("Slot(%q) = %d, want %d", key, got, want)
		}
	}
	if Slot("{user1000}.following") != Slot("user1000") {
		t.Error("hash tag not applied")
	}
}

// TestSlotAgainstCluster compares Slot with CLUSTER KEYSLOT on a real cluster node, for
// tricky and random keys, so that FuzzSlotTag checks the real rule.
func TestSlotAgainstCluster(t *testing.T) {
	t.Parallel()
	c := redistest.StartCluster(t, 3)
	node := c.Servers[0].Client(t)
	ctx := context.Background()

	keys := []string{"foo", "{", "}", "{}", "}{", "{}}", "{{}}", "a{b}c{d}", "{a}", "x{y", "x}y{z}",
		"dlock:orders:42", "{dlock:orders:42}:fence", "dlock:{orders}:42", "dlock:{orders}:42:fence"}
	rng := rand.New(rand.NewPCG(1, 2))
	alphabet := []byte("ab{}:\x00\xff")
	for range 500 {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			b[i] = alphabet[rng.IntN(len(alphabet))]
		}
		keys = append(keys, string(b))
	}
	pipe := node.Pipeline()
	cmds := make([]*redis.IntCmd, len(keys))
	for i, k := range keys {
		cmds[i] = pipe.ClusterKeySlot(ctx, k)
	}
	if _, err := pipe.Exec(ctx); err != nil {
		t.Fatal(err)
	}
	for i, k := range keys {
		if got, want := Slot(k), int(cmds[i].Val()); got != want {
			t.Errorf("Slot(%q) = %d, CLUSTER KEYSLOT says %d", k, got, want)
		}
	}
}

func TestFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		prefix, name string
		want         Keys
		err          string // substring of the error; "" for none
	}{
		{prefix: "dlock:", name: "orders:42", want: Keys{
			Lock: "dlock:orders:42", Fence: "{dlock:orders:42}:fence", Channel: "{dlock:orders:42}:released", Tag: "{dlock:orders:42}", Turns: "{dlock:orders:42}:turns", Asks: "{dlock:orders:42}:asks", Gone: "{dlock:orders:42}:gone:"}},
		{prefix: "", name: "plain", want: Keys{
			Lock: "plain", Fence: "{plain}:fence", Channel: "{plain}:released", Tag: "{plain}", Turns: "{plain}:turns", Asks: "{plain}:asks", Gone: "{plain}:gone:"}},
		{prefix: "dlock:", name: "{orders}:42", want: Keys{
			Lock: "dlock:{orders}:42", Fence: "dlock:{orders}:42:fence", Channel: "dlock:{orders}:42:released", Tag: "dlock:{orders}:42", Turns: "dlock:{orders}:42:turns", Asks: "dlock:{orders}:42:asks", Gone: "dlock:{orders}:42:gone:"}},
		{prefix: "{app}:", name: "job", want: Keys{
			Lock: "{app}:job", Fence: "{app}:job:fence", Channel: "{app}:job:released", Tag: "{app}:job", Turns: "{app}:job:turns", Asks: "{app}:job:asks", Gone: "{app}:job:gone:"}},
		{prefix: "dlock:", name: "a{b", want: Keys{
			Lock: "dlock:a{b", Fence: "{dlock:a{b}:fence", Channel: "{dlock:a{b}:released", Tag: "{dlock:a{b}", Turns: "{dlock:a{b}:turns", Asks: "{dlock:a{b}:asks", Gone: "{dlock:a{b}:gone:"}},
		{prefix: "dlock:", name: "{", want: Keys{
			Lock: "dlock:{", Fence: "{dlock:{}:fence", Channel: "{dlock:{}:released", Tag: "{dlock:{}", Turns: "{dlock:{}:turns", Asks: "{dlock:{}:asks", Gone: "{dlock:{}:gone:"}},
		{prefix: "dlock:", name: "{a}}", want: Keys{ // a '}' after a valid tag is harmless
			Lock: "dlock:{a}}", Fence: "dlock:{a}}:fence", Channel: "dlock:{a}}:released", Tag: "dlock:{a}}", Turns: "dlock:{a}}:turns", Asks: "dlock:{a}}:asks", Gone: "dlock:{a}}:gone:"}},
		{prefix: "dlock:", name: "ключ ✓", want: Keys{
			Lock: "dlock:ключ ✓", Fence: "{dlock:ключ ✓}:fence", Channel: "{dlock:ключ ✓}:released", Tag: "{dlock:ключ ✓}", Turns: "{dlock:ключ ✓}:turns", Asks: "{dlock:ключ ✓}:asks", Gone: "{dlock:ключ ✓}:gone:"}},
		{prefix: "dlock:", name: "", err: "empty lock name"},
		{prefix: "", name: "", err: "empty lock name"},
		{prefix: "dlock:", name: "a}b", err: "'}' outside a hash tag"},
		{prefix: "dlock:", name: "{}", err: "'}' outside a hash tag"}, // empty tag
		{prefix: "dlock:", name: "}{a}", want: Keys{ // a '}' before the tag is harmless
			Lock: "dlock:}{a}", Fence: "dlock:}{a}:fence", Channel: "dlock:}{a}:released", Tag: "dlock:}{a}", Turns: "dlock:}{a}:turns", Asks: "dlock:}{a}:asks", Gone: "dlock:}{a}:gone:"}},
		{prefix: "dlock:", name: "x{}{a}", err: "'}' outside a hash tag"}, // first tag empty
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%q+%q", tt.prefix, tt.name), func(t *testing.T) {
			got, err := For(tt.prefix, tt.name)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), tt.err) {
					t.Fatalf("For = %+v, %v; want an error containing %q", got, err, tt.err)
				}
				if got != (Keys{}) {
					t.Errorf("For returned keys %+v with its error", got)
				}
				return
			}
			if err != nil {
				t.Fatalf("For: %v", err)
			}
			if got != tt.want {
				t.Fatalf("For = %+v\nwant  %+v", got, tt.want)
			}
			checkSameSlot(t, got)
		})
	}
}

func TestSlotTag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key, want string
		err       bool
	}{
		{key: "k", want: "{k}"},
		{key: "dlock:x", want: "{dlock:x}"},
		{key: "{t}rest", want: "{t}rest"},
		{key: "pre{t}", want: "pre{t}"},
		{key: "a{b}c{d}", want: "a{b}c{d}"},
		{key: "{", want: "{{}"},
		{key: "a{{b", want: "{a{{b}"},
		{key: "{{b}", want: "{{b}"}, // tag "{b"
		{key: "", err: true},
		{key: "}", err: true},
		{key: "a}", err: true},
		{key: "{}", err: true},
		{key: "{}x}", err: true},
		{key: "}{x}", want: "}{x}"}, // tag "x": a '}' before the first '{' does not matter
	}
	for _, tt := range tests {
		got, err := SlotTag(tt.key)
		if tt.err {
			if err == nil {
				t.Errorf("SlotTag(%q) = %q, want an error", tt.key, got)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("SlotTag(%q) = %q, %v; want %q", tt.key, got, err, tt.want)
			continue
		}
		if tt.key != "" && Slot(got+":anything") != Slot(tt.key) {
			t.Errorf("SlotTag(%q) = %q hashes to slot %d, the key to %d", tt.key, got, Slot(got+":anything"), Slot(tt.key))
		}
	}
}

func checkSameSlot(t *testing.T, k Keys) {
	t.Helper()
	want := Slot(k.Lock)
	others := []string{k.Fence, k.Channel, k.Tag, k.Turns, k.Asks, k.Queue(), k.QueueDeadlines(),
		k.Readers(), k.Writers(), k.Permits(), k.GrantedPrefix() + "0123456789abcdef0123456789abcdef",
		k.Tag + ":}{odd}", ReadersOf(k.Tag)}
	for _, suffix := range Companions() {
		others = append(others, k.Tag+suffix)
	}
	for _, other := range others {
		if got := Slot(other); got != want {
			t.Errorf("%q hashes to slot %d, lock key %q to %d", other, got, k.Lock, want)
		}
	}
}

// FuzzSlotTag checks that for any prefix and name For either fails or derives keys and a
// channel that all share the lock key's Redis Cluster slot, are distinct from the lock key
// and from each other, and extend a slot tag so that any suffix keeps the slot.
func FuzzSlotTag(f *testing.F) {
	for _, seed := range [][2]string{
		{"dlock:", "orders:42"}, {"", "x"}, {"dlock:", "{orders}:42"}, {"{app}:", "job"},
		{"dlock:", "a{b"}, {"dlock:", "{"}, {"dlock:", "}"}, {"dlock:", "{}"}, {"dlock:", "a}b"},
		{"", "{}x"}, {"", "}{x}"}, {"", "{{x}}"}, {"dlock:", "{a}}"}, {"", "\xff\x00{"},
		{"p}", "x"}, {"{p", "}x"}, {"", ""}, {"dlock:", ""}, {"", "ключ"},
	} {
		f.Add(seed[0], seed[1])
	}
	f.Fuzz(func(t *testing.T, prefix, name string) {
		k, err := For(prefix, name)
		if err != nil {
			if k != (Keys{}) {
				t.Fatalf("For(%q, %q) returned keys %+v with error %v", prefix, name, k, err)
			}
			if name != "" && !strings.Contains(prefix+name, "}") {
				t.Fatalf("For(%q, %q) failed on a key without '}': %v", prefix, name, err)
			}
			return
		}
		if name == "" {
			t.Fatalf("For(%q, %q) accepted an empty name", prefix, name)
		}
		if k.Lock != prefix+name {
			t.Fatalf("Lock = %q, want %q", k.Lock, prefix+name)
		}
		if k.Fence == k.Lock || k.Channel == k.Lock || k.Fence == k.Channel {
			t.Fatalf("keys not distinct: %+v", k)
		}
		if tag, _ := SlotTag(k.Lock); k.Tag != tag {
			t.Fatalf("Tag = %q, SlotTag says %q", k.Tag, tag)
		}
		checkSameSlot(t, k)
		tag, err := SlotTag(k.Lock)
		if err != nil {
			t.Fatalf("For succeeded but SlotTag(%q) failed: %v", k.Lock, err)
		}
		if got, want := Slot(tag+":x}{y}"), Slot(k.Lock); got != want {
			t.Fatalf("SlotTag(%q) = %q: a suffix changes its slot (%d, lock %d)", k.Lock, tag, got, want)
		}
		if k2, _ := For(prefix, name); k2 != k {
			t.Fatalf("For is not deterministic: %+v then %+v", k, k2)
		}
	})
}
