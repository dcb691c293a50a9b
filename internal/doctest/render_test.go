package doctest

import (
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"slices"
	"strconv"
	"strings"
	"testing"
)

const modulePath = "github.com/seed51c676c8/dlock"

// autoImports are the packages a snippet may use without importing them, as the reader
// would (goimports adds them). Anything else, the extra/ adapters included, a snippet
// imports itself, so that the reader sees the import path.
var autoImports = map[string]string{
	"context":   "context",
	"errors":    "errors",
	"fmt":       "fmt",
	"log":       "log",
	"slog":      "log/slog",
	"time":      "time",
	"testing":   "testing",
	"redis":     "github.com/redis/go-redis/v9",
	"dlock":     modulePath,
	"dlocktest": modulePath + "/dlocktest",
	"observe":   modulePath + "/observe",
}

// prelude declares what a fragment may use without declaring it: the ctx, Redis client
// and dlock Client of the surrounding code, and the work done under a lock. Fragments
// share a package with it; a snippet that is a whole file (a package clause) does not.
const prelude = `package snippet

import (
	"context"

	"github.com/redis/go-redis/v9"
	"github.com/seed51c676c8/dlock"
)

var (
	ctx    context.Context
	rdb    *redis.Client
	client *dlock.Client
)

func rebuild(ctx context.Context) error { return ctx.Err() }

func buildReport(ctx context.Context, token uint64) error { return ctx.Err() }
`

// rendered is a snippet turned into a Go file.
type rendered struct {
	src     string   // the file
	imports []string // every path it imports
	whole   bool     // the snippet is a file of its own, compiled without the prelude
}

// render turns s into a Go file. A snippet with a package clause is used as it is. Any
// other is split into its leading imports and the rest; the rest is kept as top-level
// declarations if it parses as such (a func TestX, say), else it becomes the body of a
// func returning error (a fragment that ends with a return keeps it; others get one).
// The packages of autoImports that the code uses and does not import are added.
func render(s snippet) (rendered, error) {
	directive := fmt.Sprintf("//line %s:%d\n", s.doc, s.line)
	if isWholeFile(s.code) {
		paths, err := importsOf(s.code)
		return rendered{src: directive + s.code, imports: paths, whole: true}, err
	}
	head, rest, restLine := splitImports(s.code)
	directive = fmt.Sprintf("//line %s:%d\n", s.doc, s.line+restLine)
	src := "package snippet\n\n" + head + "\n" + directive + rest
	if _, err := parser.ParseFile(token.NewFileSet(), "", src, parser.SkipObjectResolution); err != nil {
		src = "package snippet\n\n" + head + "\nfunc _() error {\n" + directive + rest
		if !endsWithReturn(src + "}\n") {
			src += "\treturn nil\n"
		}
		src += "}\n"
	}
	f, err := parser.ParseFile(token.NewFileSet(), s.doc, src, parser.SkipObjectResolution)
	if err != nil {
		return rendered{}, err
	}
	added := missingImports(f)
	if len(added) > 0 {
		var b strings.Builder
		for _, p := range added {
			fmt.Fprintf(&b, "import %q\n", p)
		}
		src = strings.Replace(src, "package snippet\n\n", "package snippet\n\n"+b.String(), 1)
	}
	paths, err := importsOf(src)
	return rendered{src: src, imports: paths}, err
}

func isWholeFile(code string) bool {
	for line := range strings.Lines(code) {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "//") {
			continue
		}
		return strings.HasPrefix(line, "package ")
	}
	return false
}

// splitImports splits code into its leading import declarations (with the blank lines
// and comments among them) and the rest, and says on which line of code, from 0, the
// rest starts.
func splitImports(code string) (head, rest string, restLine int) {
	lines := strings.SplitAfter(code, "\n")
	i, inBlock := 0, false
	for ; i < len(lines); i++ {
		line := strings.TrimSpace(lines[i])
		switch {
		case inBlock:
			inBlock = line != ")"
		case line == "" || strings.HasPrefix(line, "//"):
		case strings.HasPrefix(line, "import ("):
			inBlock = true
		case strings.HasPrefix(line, "import "):
		default:
			return strings.Join(lines[:i], ""), strings.Join(lines[i:], ""), i
		}
	}
	return code, "", i
}

// endsWithReturn reports whether the func _ of src ends with a return statement.
func endsWithReturn(src string) bool {
	f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.SkipObjectResolution)
	if err != nil {
		return false
	}
	for _, d := range f.Decls {
		if fn, ok := d.(*ast.FuncDecl); ok && fn.Name.Name == "_" && len(fn.Body.List) > 0 {
			_, ok := fn.Body.List[len(fn.Body.List)-1].(*ast.ReturnStmt)
			return ok
		}
	}
	return false
}

// missingImports returns the paths of autoImports whose names f uses as a package
// (name.X) without importing them, sorted.
func missingImports(f *ast.File) []string {
	imported := make(map[string]bool)
	for _, spec := range f.Imports {
		imported[importName(spec)] = true
	}
	var paths []string
	ast.Inspect(f, func(n ast.Node) bool {
		sel, ok := n.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		if id, ok := sel.X.(*ast.Ident); ok && !imported[id.Name] && autoImports[id.Name] != "" {
			imported[id.Name] = true
			paths = append(paths, autoImports[id.Name])
		}
		return true
	})
	slices.Sort(paths)
	return paths
}

// importName is the name a file refers to an imported package by.
func importName(spec *ast.ImportSpec) string {
	if spec.Name != nil {
		return spec.Name.Name
	}
	p, _ := strconv.Unquote(spec.Path.Value)
	for name, known := range autoImports {
		if known == p {
			return name
		}
	}
	elems := strings.Split(p, "/")
	last := elems[len(elems)-1]
	if len(elems) > 1 && len(last) > 1 && last[0] == 'v' && strings.Trim(last[1:], "0123456789") == "" {
		last = elems[len(elems)-2] // a major version suffix: .../v9
	}
	return last
}

// importsOf returns the import paths of the Go file src.
func importsOf(src string) ([]string, error) {
	f, err := parser.ParseFile(token.NewFileSet(), "", src, parser.ImportsOnly|parser.SkipObjectResolution)
	if err != nil {
		return nil, err
	}
	var paths []string
	for _, spec := range f.Imports {
		p, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			return nil, errors.New("bad import path " + spec.Path.Value)
		}
		paths = append(paths, p)
	}
	return paths, nil
}

func TestRender(t *testing.T) {
	cases := []struct {
		name, code string
		want, not  []string // substrings of the rendered file that must, and must not, be there
	}{
		{"fragment", "lease, err := client.Mutex(\"a\").Lock(ctx)\n_ = lease\n_ = err\n",
			[]string{"func _() error {\n//line d.md:3\nlease", "\treturn nil\n}"}, []string{"import"}},
		{"fragment ending in return", "time.Sleep(time.Second)\nreturn nil\n",
			[]string{"import \"time\"", "func _() error {"}, []string{"\treturn nil\n}"}},
		{"declarations", "func TestX(t *testing.T) {\n\tt.Log(dlock.ErrLost)\n}\n",
			[]string{"import \"github.com/seed51c676c8/dlock\"", "import \"testing\"", "//line d.md:3\nfunc TestX"},
			[]string{"func _()"}},
		{"own imports", "import (\n\tx \"github.com/seed51c676c8/dlock/extra/otel\"\n)\n\n_, _ = x.New()\n",
			[]string{"//line d.md:7\n_, _ = x.New()"}, []string{"import \"github.com/seed51c676c8/dlock\""}},
		{"whole file", "package main\n\nfunc main() {}\n", []string{"//line d.md:3\npackage main"}, nil},
	}
	for _, c := range cases {
		r, err := render(snippet{doc: "d.md", line: 3, code: c.code})
		if err != nil {
			t.Errorf("%s: %v", c.name, err)
			continue
		}
		for _, w := range c.want {
			if !strings.Contains(r.src, w) {
				t.Errorf("%s: the file lacks %q:\n%s", c.name, w, r.src)
			}
		}
		for _, n := range c.not {
			if strings.Contains(r.src, n) {
				t.Errorf("%s: the file has %q:\n%s", c.name, n, r.src)
			}
		}
	}
}

func TestModuleOf(t *testing.T) {
	for paths, want := range map[string]string{
		"context github.com/seed51c676c8/dlock":                                        ".",
		"github.com/seed51c676c8/dlock/dlocktest":                                      ".",
		"github.com/seed51c676c8/dlock github.com/seed51c676c8/dlock/extra/prometheus": "extra/prometheus",
	} {
		if got, err := moduleOf(strings.Fields(paths)); got != want || err != nil {
			t.Errorf("moduleOf(%s) = %q, %v; want %q", paths, got, err, want)
		}
	}
	two := []string{modulePath + "/extra/otel", modulePath + "/extra/prometheus"}
	if _, err := moduleOf(two); err == nil {
		t.Errorf("moduleOf(%v): no error for two modules", two)
	}
}
