package doctest

import (
	"os"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

var (
	// inlineLink matches [text](target) and [text](target "title"), and images.
	inlineLink = regexp.MustCompile(`\]\(([^()\s]+)(?:\s+"[^"]*")?\)`)
	// refLink matches a reference definition: [name]: target
	refLink = regexp.MustCompile(`^\s*\[[^\]]+\]:\s*(\S+)`)
	// codeSpan matches inline code, where brackets are not links.
	codeSpan = regexp.MustCompile("`[^`]*`")
	// scheme matches a target with a URL scheme (https:, mailto:), which is not checked.
	scheme = regexp.MustCompile(`^[a-zA-Z][a-zA-Z0-9+.-]*:`)
)

// TestLinks checks that every relative link of the documents (README.md, the other
// Markdown files at the root, docs/*.md) leads to a file or directory of the repository,
// and to a heading of the target document when it names one (#anchor, as GitHub makes
// them). Links with a scheme (https:) are not followed.
func TestLinks(t *testing.T) {
	docs := documents(t)
	anchors := make(map[string]map[string]bool) // by path from the root
	links := 0
	for _, d := range docs {
		for i, line := range d.prose() {
			for _, target := range linkTargets(line) {
				links++
				if msg := checkLink(d.rel, target, anchors); msg != "" {
					t.Errorf("%s:%d: link %q: %s", d.rel, i+1, target, msg)
				}
			}
		}
	}
	t.Logf("%d relative links in %d documents", links, len(docs))
}

// linkTargets returns the relative link targets on one line of prose.
func linkTargets(line string) []string {
	line = codeSpan.ReplaceAllString(line, "")
	var out []string
	for _, m := range inlineLink.FindAllStringSubmatch(line, -1) {
		out = append(out, m[1])
	}
	if m := refLink.FindStringSubmatch(line); m != nil {
		out = append(out, m[1])
	}
	var rel []string
	for _, target := range out {
		if !scheme.MatchString(target) {
			rel = append(rel, strings.Trim(target, "<>"))
		}
	}
	return rel
}

// checkLink says what is wrong with the link target in the document from (both relative
// to the repository root), or "" if nothing is. anchors caches the headings of the
// documents read so far.
func checkLink(from, target string, anchors map[string]map[string]bool) string {
	file, anchor, _ := strings.Cut(target, "#")
	to := from
	if file != "" {
		to = path.Clean(path.Join(path.Dir(from), file))
	}
	if to == ".." || strings.HasPrefix(to, "../") || path.IsAbs(file) {
		return "leads outside the repository"
	}
	info, err := os.Stat(filepath.Join(root, filepath.FromSlash(to)))
	if err != nil {
		return "no such file or directory"
	}
	if anchor == "" {
		return ""
	}
	if info.IsDir() || !strings.HasSuffix(to, ".md") {
		return "an anchor into something that is not a Markdown file"
	}
	if anchors[to] == nil {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(to)))
		if err != nil {
			return err.Error()
		}
		anchors[to] = document{rel: to, lines: splitLines(data)}.headings()
	}
	if !anchors[to][anchor] {
		return "no heading with anchor #" + anchor + " in " + to
	}
	return ""
}

func TestLinkTargets(t *testing.T) {
	line := "See [a](docs/a.md#x), ![img](b.png \"t\"), `[not](c.md)`, [web](https://x.org/y)."
	got := strings.Join(linkTargets(line), " ")
	if want := "docs/a.md#x b.png"; got != want {
		t.Errorf("linkTargets: %q, want %q", got, want)
	}
	if got := strings.Join(linkTargets("[ref]: ../ARCHITECTURE.md"), " "); got != "../ARCHITECTURE.md" {
		t.Errorf("linkTargets of a reference: %q", got)
	}
}

func TestHeadingAnchors(t *testing.T) {
	d := document{lines: []string{"# The kinds of lock", "## Timeouts, clients and WAITAOF",
		"```", "# not a heading", "```", "## `dlock top`: a live view", "## Keys", "## Keys"}}
	got := d.headings()
	for _, want := range []string{"the-kinds-of-lock", "timeouts-clients-and-waitaof",
		"dlock-top-a-live-view", "keys", "keys-1"} {
		if !got[want] {
			t.Errorf("no anchor %q in %v", want, got)
		}
	}
	if got["not-a-heading"] {
		t.Errorf("a comment in a fenced block was taken for a heading")
	}
}

func TestCheckLink(t *testing.T) {
	anchors := make(map[string]map[string]bool)
	for _, c := range []struct{ from, target, want string }{
		{"README.md", "docs/locks.md#where-each-kind-runs", ""},
		{"docs/locks.md", "../ARCHITECTURE.md", ""},
		{"docs/locks.md", "#a-hot-mutex", ""},
		{"docs/locks.md", "../extra/prometheus", ""},
		{"README.md", "docs/nothing-here.md", "no such file or directory"},
		{"docs/locks.md", "quorum.md#no-such-heading", "no heading with anchor #no-such-heading in docs/quorum.md"},
		{"docs/locks.md", "../../outside.md", "leads outside the repository"},
	} {
		if got := checkLink(c.from, c.target, anchors); got != c.want {
			t.Errorf("checkLink(%q, %q) = %q, want %q", c.from, c.target, got, c.want)
		}
	}
}
