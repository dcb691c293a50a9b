package structure

import (
	"bytes"
	"fmt"
	"go/ast"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestFunctionLength checks that no function or method of the root package or of a
// package under internal/ is longer than maxFuncLines, counted from the line of `func` to
// that of its closing brace, both included. Only the files that the build includes count,
// not tests and not generated files (a "Code generated ... DO NOT EDIT." line); a function
// literal counts in the function that contains it.
func TestFunctionLength(t *testing.T) {
	type long struct {
		where string
		lines int
	}
	var over []long
	var funcs int
	longest := long{}
	for _, p := range packages(t) {
		if p.rel != "." && !p.internal() {
			continue
		}
		for _, f := range p.files {
			if ast.IsGenerated(f) {
				continue
			}
			for _, decl := range f.Decls {
				fd, ok := decl.(*ast.FuncDecl)
				if !ok || fd.Body == nil {
					continue
				}
				funcs++
				lines := p.fset.Position(fd.Body.Rbrace).Line - p.fset.Position(fd.Pos()).Line + 1
				l := long{filepath.Join(p.rel, p.at(fd.Pos())) + " " + declName(fd), lines}
				if lines > longest.lines {
					longest = l
				}
				if lines > maxFuncLines {
					over = append(over, l)
				}
			}
		}
	}
	t.Logf("%d functions and methods in the root package and under internal/; the longest: %s, %d lines",
		funcs, longest.where, longest.lines)
	if len(over) == 0 {
		return
	}
	sort.SliceStable(over, func(i, j int) bool { return over[i].lines > over[j].lines })
	var b strings.Builder
	for _, l := range over {
		fmt.Fprintf(&b, "\n    %s: %d lines", l.where, l.lines)
	}
	t.Errorf("%d functions are longer than %d lines (from `func` to its closing brace): split "+
		"each into steps that have names of their own:%s", len(over), maxFuncLines, b.String())
}

// TestRootLines checks that the root package's non-test Go files (every *.go file of the
// repository root but *_test.go) have fewer than rootLinesUnder lines together, counted as
// wc -l counts them: the root is the API, and the engine's work belongs in internal/engine.
func TestRootLines(t *testing.T) {
	names, err := filepath.Glob(filepath.Join(repositoryRoot(t), "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	type file struct {
		name  string
		lines int
	}
	var files []file
	total := 0
	for _, name := range names {
		if strings.HasSuffix(name, "_test.go") {
			continue
		}
		data, err := os.ReadFile(name)
		if err != nil {
			t.Fatal(err)
		}
		n := bytes.Count(data, []byte("\n"))
		files = append(files, file{filepath.Base(name), n})
		total += n
	}
	t.Logf("the root package's non-test Go files: %d lines in %d files (under %d allowed)",
		total, len(files), rootLinesUnder)
	if total < rootLinesUnder {
		return
	}
	sort.SliceStable(files, func(i, j int) bool { return files[i].lines > files[j].lines })
	var b strings.Builder
	for _, f := range files {
		fmt.Fprintf(&b, "\n    %5d %s", f.lines, f.name)
	}
	t.Errorf("the root package's non-test Go files have %d lines together (wc -l), not under %d: "+
		"the root is the API; move what is not (engine work, decoding, switching on client "+
		"types) into internal/. By file:%s", total, rootLinesUnder, b.String())
}
