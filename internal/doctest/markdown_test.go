package doctest

import (
	"bufio"
	"bytes"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// root is the repository root, from this package's directory.
const root = "../.."

// document is one Markdown file that is checked, read once.
type document struct {
	rel   string // its path from the repository root, with slashes: "docs/quorum.md"
	lines []string
}

// documents returns the Markdown files at the root (README.md, ARCHITECTURE.md...) and in
// docs/, failing t when one cannot be read or either place has none.
func documents(t *testing.T) []document {
	t.Helper()
	var rels []string
	for _, dir := range []string{".", "docs"} {
		files, err := filepath.Glob(filepath.Join(root, dir, "*.md"))
		if err != nil || len(files) == 0 {
			t.Fatalf("%s/*.md: no documents found (%v)", dir, err)
		}
		for _, f := range files {
			rels = append(rels, path.Join(dir, filepath.Base(f)))
		}
	}
	var docs []document
	for _, rel := range rels {
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(rel)))
		if err != nil {
			t.Fatal(err)
		}
		docs = append(docs, document{rel: rel, lines: splitLines(data)})
	}
	return docs
}

func splitLines(data []byte) []string {
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	return lines
}

// snippet is one ```go block of a document.
type snippet struct {
	doc  string // the document's path from the root
	line int    // the line of the snippet's first line of code, from 1
	code string
}

func (s snippet) String() string { return s.doc + ":" + strconv.Itoa(s.line) }

// snippets returns the ```go blocks of d, in order. A block that is not closed runs to
// the end of the document, where the compiler will say so.
func (d document) snippets() []snippet {
	var out []snippet
	var cur *snippet
	var code []string
	for i, line := range d.lines {
		fence := strings.TrimSpace(line)
		switch {
		case cur == nil && fence == "```go":
			cur, code = &snippet{doc: d.rel, line: i + 2}, nil
		case cur != nil && fence == "```":
			cur.code = strings.Join(code, "\n") + "\n"
			out, cur = append(out, *cur), nil
		case cur != nil:
			code = append(code, line)
		}
	}
	if cur != nil {
		cur.code = strings.Join(code, "\n") + "\n"
		out = append(out, *cur)
	}
	return out
}

// prose returns d's lines with fenced blocks blanked, so that links are looked for in
// the text only; the line numbers stay those of the document.
func (d document) prose() []string {
	lines := slices.Clone(d.lines)
	inFence := false
	for i, line := range lines {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			inFence = !inFence
			lines[i] = ""
			continue
		}
		if inFence {
			lines[i] = ""
		}
	}
	return lines
}

// headings returns the anchors GitHub gives the headings of d: the text lowercased,
// without punctuation, spaces as dashes, and -1, -2... for repeats.
func (d document) headings() map[string]bool {
	anchors := make(map[string]bool)
	seen := make(map[string]int)
	for _, line := range d.prose() {
		text, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		text = strings.TrimSpace(strings.TrimLeft(text, "#"))
		a := slug(text)
		if n := seen[a]; n > 0 {
			anchors[a+"-"+strconv.Itoa(n)] = true
		} else {
			anchors[a] = true
		}
		seen[a]++
	}
	return anchors
}

func slug(heading string) string {
	var b strings.Builder
	for _, r := range strings.ToLower(heading) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 0x7f:
			b.WriteRune(r)
		}
	}
	return b.String()
}
