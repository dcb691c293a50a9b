package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/seed51c676c8/dlock"
	"github.com/seed51c676c8/dlock/internal/redistest"
)

// TestOwnerShown: the OWNER column and the JSON "owner" field: the holder's owner, each
// owner of several holders once, "-" (and no field) when none is known.
func TestOwnerShown(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		node dlock.NodeInfo
		want string
	}{
		{"mutex", dlock.NodeInfo{Kind: dlock.KindMutex, Holders: []dlock.Holder{{Token: "t1", Owner: "web-1:4242", Permits: 1, TTL: time.Second}}}, "web-1:4242"},
		{"readers", dlock.NodeInfo{Kind: dlock.KindRWMutex, Holders: []dlock.Holder{
			{Token: "r1", Owner: "a:1", Reader: true, Permits: 1, TTL: time.Second},
			{Token: "r2", Owner: "b:2", Reader: true, Permits: 1, TTL: time.Second},
			{Token: "r3", Owner: "a:1", Reader: true, Permits: 1, TTL: time.Second},
			{Token: "r4", Reader: true, Permits: 1, TTL: time.Second},
		}}, "a:1,b:2"},
		{"semaphore", dlock.NodeInfo{Kind: dlock.KindSemaphore, Holders: []dlock.Holder{{Token: "s1", Owner: "batch", Permits: 2, TTL: time.Second}}}, "batch"},
		{"not known", dlock.NodeInfo{Kind: dlock.KindMutex, Holders: []dlock.Holder{{Token: "t1", Permits: 1, TTL: time.Second}}}, ""},
		{"free", dlock.NodeInfo{}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			in := nodeLockInfo(tt.node, false)
			in.Name = "job"
			if in.Owner != tt.want {
				t.Fatalf("owner %q, want %q", in.Owner, tt.want)
			}
			cells := in.cells(new(redactor), false)
			if got := cells[indexOf(t, tableHeader(false), "OWNER")]; got != dash(tt.want) {
				t.Errorf("OWNER cell %q, want %q", got, dash(tt.want))
			}
			b, err := json.Marshal(in)
			if err != nil {
				t.Fatal(err)
			}
			var m map[string]any
			if err := json.Unmarshal(b, &m); err != nil {
				t.Fatal(err)
			}
			if got, ok := m["owner"]; tt.want == "" && ok || tt.want != "" && got != tt.want {
				t.Errorf(`JSON "owner": %v (present %v), want %q: %s`, got, ok, tt.want, b)
			}
		})
	}
}

func indexOf(t *testing.T, header []string, col string) int {
	t.Helper()
	for i, h := range header {
		if h == col {
			return i
		}
	}
	t.Fatalf("no column %s in %q", col, header)
	return -1
}

// Names in scripts whose characters are not one column each, and their widths on a
// terminal, written out here rather than measured by the library under test.
var wideNames = []struct {
	name  string
	width int
}{
	{"日本語のロック", 14},        // CJK: two columns each
	{"cafe\u0301-lock", 9}, // a combining acute accent: no column of its own
	{"한국어-잠금", 11},
	{"plain-lock", 10},
}

// TestTableWideCharacters: the columns line up by the width characters take on a
// terminal, and wide names are cut by that width.
func TestTableWideCharacters(t *testing.T) {
	t.Parallel()
	cells := [][]string{{"NAME", "KIND", "OWNER"}}
	for _, n := range wideNames {
		cells = append(cells, []string{n.name, "mutex", "app:1"})
	}
	lines := layoutTable(cells, 0)
	kindAt := strings.Index(lines[0], "KIND")
	if kindAt != 14+2 {
		t.Fatalf("KIND at column %d, want 16 (the widest name, 14, and 2 spaces): %q", kindAt, lines[0])
	}
	for i, n := range wideNames {
		want := n.name + strings.Repeat(" ", kindAt-n.width) + "mutex  app:1"
		if lines[i+1] != want {
			t.Errorf("row %d: %q, want %q", i, lines[i+1], want)
		}
	}
	for _, tt := range []struct {
		s     string
		width int
		want  string
	}{
		{"日本語のロック", 7, "日本語…"},
		{"日本語のロック", 8, "日本語…"}, // the fourth character would straddle the edge
		{"cafe\u0301-lock-name", 6, "cafe\u0301-…"},
	} {
		if got := truncate(tt.s, tt.width); got != tt.want {
			t.Errorf("truncate(%q, %d) = %q, want %q", tt.s, tt.width, got, tt.want)
		}
	}
	if got, want := truncateMiddle("日本語のロック", 9), "日本…ック"; got != want {
		t.Errorf("truncateMiddle: %q, want %q", got, want)
	}
}

// TestTableIgnoresLocale: a character of ambiguous width (Greek letters, the ellipsis)
// takes one column whatever the locale says, so that status prints the same table under a
// CJK locale, where go-runewidth would otherwise count it as two, as under any other.
func TestTableIgnoresLocale(t *testing.T) {
	t.Parallel()
	srv := redistest.Start(t)
	rdb := srv.Client(t)
	rdb.Set(context.Background(), "dlock:αβγ-lock", "tok-a", 0) // no expiry: a TTL would differ between the runs
	env := []string{"DLOCK_REDIS=" + serverURL(srv)}
	var outs []string
	for _, locale := range []string{"C.UTF-8", "ja_JP.UTF-8", "zh_CN.UTF-8"} {
		r := runBin(t, append(env, "LC_ALL="+locale, "LC_CTYPE="+locale, "LANG="+locale), "status", "αβγ-lock", "plain")
		expect(t, r, 0, "αβγ-lock")
		outs = append(outs, r.stdout)
	}
	want := "NAME      KIND   HOLDER"
	if !strings.HasPrefix(outs[0], want) {
		t.Fatalf("status: %q, want it to start with %q (the name takes 8 columns)", outs[0], want)
	}
	for i, out := range outs[1:] {
		if out != outs[0] {
			t.Errorf("under a CJK locale (%d):\n%s\nwant, as under C.UTF-8:\n%s", i+1, out, outs[0])
		}
	}
}
