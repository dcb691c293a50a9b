package structure

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

// TestArchitecture checks that ARCHITECTURE.md, the map of the repository, stays short and
// true:
//
//   - It has at most maxArchitectureWords words, counted as wc -w counts them (the whole
//     file).
//   - Every backquoted token that looks like a path of the repository (it has no space,
//     and it has a "/" or ends in .go, .lua or .md; URLs aside) names a file or directory
//     from the repository root: `internal/engine/hold.go`, `internal/scripts/`. A token
//     with *, ? or [ is a pattern (path.Match) that must match at least one.
//   - Every claim "`PATH.go` owns `T`" holds: T is a type declared at the top level of
//     PATH.go. A claim may name several types ("`PATH.go` owns `A`, `B` and `C`"), write
//     a type as `*T`, and wrap across lines. "`PATH.go` owns `T` and its methods" (or "`A`
//     and `B` and their methods") also claims that every method of T, in the non-test files
//     of PATH.go's directory, is declared in PATH.go. "`PATH.go` owns no type" claims that
//     PATH.go declares none.
func TestArchitecture(t *testing.T) {
	root := repositoryRoot(t)
	data, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	words := len(strings.Fields(text))
	t.Logf("ARCHITECTURE.md: %d words (at most %d)", words, maxArchitectureWords)
	if words > maxArchitectureWords {
		t.Errorf("ARCHITECTURE.md has %d words (wc -w), more than %d: keep the flow, the "+
			"diagram and one line per invariant with the file that keeps it; move the long "+
			"explanations to the package docs they describe", words, maxArchitectureWords)
	}
	broken := brokenPaths(root, text)
	claims := parseClaims(text)
	var wrong []string
	for _, c := range claims {
		if msg := c.check(root); msg != "" {
			wrong = append(wrong, msg)
		}
	}
	t.Logf("ARCHITECTURE.md: %d paths that do not exist; %d \"owns\" claims, %d of them false",
		len(broken), len(claims), len(wrong))
	if len(broken) > 0 {
		t.Errorf("ARCHITECTURE.md names %d paths that do not exist from the repository root: "+
			"write each path from the root (`internal/engine/hold.go`), or fix or drop it:\n    %s",
			len(broken), strings.Join(broken, "\n    "))
	}
	if len(wrong) > 0 {
		t.Errorf("ARCHITECTURE.md makes %d false \"owns\" claims: change the claim, or move "+
			"the type (or its methods) into the file it names:\n    %s",
			len(wrong), strings.Join(wrong, "\n    "))
	}
}

var (
	// codeRE matches a backquoted token without spaces.
	codeRE = regexp.MustCompile("`([^`\\s]+)`")
	// claimRE matches an "owns" claim: the file, the list of types or "no type", and
	// "and its methods". A type is an identifier, so that "`a.go` owns `A` and `b.go`
	// owns `B`" is two claims.
	claimRE = regexp.MustCompile("`([^`\\s]+\\.go)`\\s+owns\\s+" +
		"(no\\s+types?\\b|" + typeRE + "(?:(?:\\s*,\\s*|,?\\s+and\\s+)" + typeRE + ")*)" +
		"(\\s+and\\s+(?:its|their)\\s+methods)?")
)

// typeRE matches a backquoted type name of a claim, `T` or `*T`.
const typeRE = "`\\*?[A-Za-z_][A-Za-z0-9_]*`"

// brokenPaths returns, as "line N: `token`", every path-like token of text that names
// nothing from root, with the paths it may have meant.
func brokenPaths(root, text string) []string {
	var broken []string
	var index []string // built on the first broken path
	for _, m := range codeRE.FindAllStringSubmatchIndex(text, -1) {
		tok := text[m[2]:m[3]]
		if !looksLikePath(tok) || pathExists(root, tok) {
			continue
		}
		if index == nil {
			index = repositoryPaths(root)
		}
		msg := fmt.Sprintf("line %d: `%s`", lineOf(text, m[0]), tok)
		if alt := meant(index, tok); len(alt) > 0 {
			msg += " (there is " + strings.Join(alt, ", ") + ")"
		}
		broken = append(broken, msg)
	}
	return broken
}

func looksLikePath(tok string) bool {
	if strings.Contains(tok, "://") {
		return false
	}
	return strings.Contains(tok, "/") || strings.HasSuffix(tok, ".go") ||
		strings.HasSuffix(tok, ".lua") || strings.HasSuffix(tok, ".md")
}

// pathExists reports whether tok names a file or directory from root; a pattern must
// match one.
func pathExists(root, tok string) bool {
	name := filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(tok, "/")))
	if strings.ContainsAny(tok, "*?[") {
		matches, err := filepath.Glob(name)
		return err == nil && len(matches) > 0
	}
	_, err := os.Stat(name)
	return err == nil
}

// repositoryPaths lists every file and directory under root, slash-separated, but those
// of hidden directories (.git, .bin).
func repositoryPaths(root string) []string {
	var paths []string
	filepath.WalkDir(root, func(name string, d fs.DirEntry, err error) error {
		if err != nil || name == root {
			return nil
		}
		if d.IsDir() && strings.HasPrefix(d.Name(), ".") {
			return filepath.SkipDir
		}
		rel, _ := filepath.Rel(root, name)
		paths = append(paths, filepath.ToSlash(rel))
		return nil
	})
	return paths
}

// meant returns up to three paths of index that end in tok, shortest first.
func meant(index []string, tok string) []string {
	want := strings.Split(strings.TrimSuffix(tok, "/"), "/")
	var found []string
	for _, p := range index {
		have := strings.Split(p, "/")
		if len(have) <= len(want) {
			continue
		}
		tail, ok := have[len(have)-len(want):], true
		for i := range want {
			if match, err := path.Match(want[i], tail[i]); err != nil || !match {
				ok = false
				break
			}
		}
		if ok {
			found = append(found, p)
		}
	}
	sort.SliceStable(found, func(i, j int) bool { return len(found[i]) < len(found[j]) })
	return found[:min(len(found), 3)]
}

func lineOf(text string, offset int) int { return strings.Count(text[:offset], "\n") + 1 }

// claim is one "owns" claim of ARCHITECTURE.md.
type claim struct {
	line    int
	file    string   // the path, from the repository root
	types   []string // none for "owns no type"
	methods bool     // "and its methods"
}

func parseClaims(text string) []claim {
	var claims []claim
	for _, m := range claimRE.FindAllStringSubmatchIndex(text, -1) {
		c := claim{line: lineOf(text, m[0]), file: text[m[2]:m[3]], methods: m[6] >= 0}
		for _, tm := range codeRE.FindAllStringSubmatch(text[m[4]:m[5]], -1) {
			c.types = append(c.types, strings.TrimPrefix(tm[1], "*"))
		}
		claims = append(claims, c)
	}
	return claims
}

func (c claim) String() string {
	if len(c.types) == 0 {
		return fmt.Sprintf("line %d: `%s` owns no type", c.line, c.file)
	}
	s := fmt.Sprintf("line %d: `%s` owns `%s`", c.line, c.file, strings.Join(c.types, "`, `"))
	if c.methods {
		s += " and its methods"
	}
	return s
}

// check returns why c is false, or "".
func (c claim) check(root string) string {
	name := filepath.Join(root, filepath.FromSlash(c.file))
	if _, err := os.Stat(name); err != nil {
		return fmt.Sprintf("%s, but there is no such file", c)
	}
	decls, err := topLevelDecls(name)
	if err != nil {
		return fmt.Sprintf("%s: %v", c, err)
	}
	if len(c.types) == 0 && len(decls.types) > 0 {
		return fmt.Sprintf("%s, but it declares %s", c, strings.Join(decls.types, ", "))
	}
	var why []string
	for _, typ := range c.types {
		if !contains(decls.types, typ) {
			why = append(why, typ+" is not declared there")
		}
	}
	if c.methods && len(why) == 0 {
		why = c.methodsElsewhere(root)
	}
	if len(why) == 0 {
		return ""
	}
	return fmt.Sprintf("%s, but %s", c, strings.Join(why, "; "))
}

// methodsElsewhere returns the methods of c's types declared in the other non-test files
// of c's directory, as "T.m is in other.go".
func (c claim) methodsElsewhere(root string) []string {
	dir := filepath.Join(root, filepath.FromSlash(path.Dir(c.file)))
	names, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	var why []string
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") || filepath.Base(name) == path.Base(c.file) {
			continue
		}
		decls, err := topLevelDecls(name)
		if err != nil {
			return []string{err.Error()}
		}
		for _, m := range decls.methods {
			if contains(c.types, strings.SplitN(m, ".", 2)[0]) {
				why = append(why, m+" is in "+filepath.Base(name))
			}
		}
	}
	return why
}

// decls are the types and methods ("T.m") that a file declares at its top level.
type decls struct{ types, methods []string }

func topLevelDecls(name string) (decls, error) {
	var d decls
	f, err := parser.ParseFile(token.NewFileSet(), name, nil, parser.SkipObjectResolution)
	if err != nil {
		return d, err
	}
	for _, decl := range f.Decls {
		switch decl := decl.(type) {
		case *ast.GenDecl:
			for _, spec := range decl.Specs {
				if ts, ok := spec.(*ast.TypeSpec); ok {
					d.types = append(d.types, ts.Name.Name)
				}
			}
		case *ast.FuncDecl:
			if decl.Recv != nil {
				d.methods = append(d.methods, declName(decl))
			}
		}
	}
	return d, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// TestParseClaims checks the claim syntax that TestArchitecture reads.
func TestParseClaims(t *testing.T) {
	text := "`a/hold.go` owns `Hold` and its methods; `a/b.go` owns `A`, `*B`\nand `C`.\n" +
		"`x.go` owns no type, `y.go` owns one type, and `z.go` owns `Z` and `W` and their methods.\n" +
		"`v.go`\nowns `V` and `u.go` owns `U`."
	var got []string
	for _, c := range parseClaims(text) {
		got = append(got, c.String())
	}
	want := []string{
		"line 1: `a/hold.go` owns `Hold` and its methods",
		"line 1: `a/b.go` owns `A`, `B`, `C`",
		"line 3: `x.go` owns no type",
		"line 3: `z.go` owns `Z`, `W` and its methods",
		"line 4: `v.go` owns `V`",
		"line 5: `u.go` owns `U`",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("parseClaims:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestArchitectureFindings checks what brokenPaths and claim.check find in a small tree.
func TestArchitectureFindings(t *testing.T) {
	root := t.TempDir()
	for name, src := range map[string]string{
		"a.go":      "package p\ntype A int\nfunc (A) m() {}\n",
		"b.go":      "package p\nfunc (*A) n() {}\nfunc f() {}\n",
		"b_test.go": "package p\nfunc (A) tested() {}\n",
		"sub/c.go":  "package sub\n",
	} {
		if err := os.MkdirAll(filepath.Dir(filepath.Join(root, name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(root, name), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	text := "`a.go`, `sub/`, `sub/*.go`, `http://x/y.md`, `no space/x`\n`c.go` and `nope/`"
	got := strings.Join(brokenPaths(root, text), "\n")
	want := "line 2: `c.go` (there is sub/c.go)\nline 2: `nope/`"
	if got != want {
		t.Errorf("brokenPaths:\n%s\nwant:\n%s", got, want)
	}
	for _, tc := range []struct{ text, want string }{
		{"`a.go` owns `A`", ""},
		{"`b.go` owns no type", ""},
		{"`a.go` owns `A` and its methods", "line 1: `a.go` owns `A` and its methods, but A.n is in b.go"},
		{"`a.go` owns `A` and `B`", "line 1: `a.go` owns `A`, `B`, but B is not declared there"},
		{"`a.go` owns no type", "line 1: `a.go` owns no type, but it declares A"},
		{"`z.go` owns `Z`", "line 1: `z.go` owns `Z`, but there is no such file"},
	} {
		claims := parseClaims(tc.text)
		if len(claims) != 1 {
			t.Errorf("%q: %d claims, want 1", tc.text, len(claims))
			continue
		}
		if got := claims[0].check(root); got != tc.want {
			t.Errorf("%q: got %q, want %q", tc.text, got, tc.want)
		}
	}
}
