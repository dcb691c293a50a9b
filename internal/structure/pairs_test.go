package structure

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// TestCallPairs counts, in each package, the pairs of files that call each other: some
// code of file A refers to a function or method declared in file B, and some code of B to
// one declared in A (non-test files of one package). At most maxCallPairs such pairs are
// allowed in each package under internal/; the root package and cmd/dlock are reported
// only.
//
// A reference is a use, anywhere in a file (a function, a method, a package-level
// initializer), of a package-level function or of a method resolved statically: a call
// x.m() where the static type of x has the method m, and likewise a method value x.m, a
// method expression T.m or a function named as a value (passed as a callback, say). Those
// count because the code in A then runs, or hands on, code that B declares, as a call
// would. Calls through an interface and through variables or fields holding a func do not
// count: what they run is not known statically.
func TestCallPairs(t *testing.T) {
	for _, p := range packages(t) {
		pairs := callPairs(p)
		switch {
		case p.internal() && len(pairs) > maxCallPairs:
			t.Errorf("%s: %d pairs of files call each other, more than %d. For each pair, "+
				"make the calls go one way: move the functions that the two files call "+
				"across into the file that calls them, or merge the two files' shared "+
				"part into one of them. Each pair, with its first call each way "+
				"(file:line caller -> callee (where declared)):\n%s",
				p.rel, len(pairs), maxCallPairs, formatPairs(p, pairs))
		case len(pairs) == 0:
			t.Logf("%s: no pairs of files call each other", p.rel)
		default:
			t.Logf("%s: %s of files call each other:\n%s", p.rel, plural(len(pairs), "pair"), formatPairs(p, pairs))
		}
	}
}

// plural is "1 pair", "2 pairs".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

// ref is the first reference from one file into another.
type ref struct {
	at     token.Pos
	caller string // the function, method or package-level declaration the use is in
	callee *types.Func
}

// pair is two files that refer to each other, a < b.
type pair struct {
	a, b   string
	ab, ba ref // the first reference from a into b, and from b into a
}

// callPairs returns the pairs of p's files that refer to each other, ordered by name.
func callPairs(p *pkg) []pair {
	first := fileRefs(p)
	var pairs []pair
	for key, ab := range first {
		if ba, ok := first[[2]string{key[1], key[0]}]; ok && key[0] < key[1] {
			pairs = append(pairs, pair{a: key[0], b: key[1], ab: ab, ba: ba})
		}
	}
	sort.Slice(pairs, func(i, j int) bool {
		return pairs[i].a < pairs[j].a || pairs[i].a == pairs[j].a && pairs[i].b < pairs[j].b
	})
	return pairs
}

// fileRefs returns the first reference from each of p's files into each other one that it
// refers to, by (from, to) file name.
func fileRefs(p *pkg) map[[2]string]ref {
	first := make(map[[2]string]ref) // by (from, to) file name
	for i, f := range p.files {
		from := p.names[i]
		for _, decl := range f.Decls {
			caller := declName(decl)
			ast.Inspect(decl, func(n ast.Node) bool {
				id, ok := n.(*ast.Ident)
				if !ok {
					return true
				}
				if fn := staticFunc(p, id); fn != nil {
					key := [2]string{from, filepath.Base(p.fset.Position(fn.Pos()).Filename)}
					if _, seen := first[key]; !seen && key[0] != key[1] {
						first[key] = ref{at: id.Pos(), caller: caller, callee: fn}
					}
				}
				return true
			})
		}
	}
	return first
}

// staticFunc returns the function or concrete method of p that id refers to, or nil.
func staticFunc(p *pkg, id *ast.Ident) *types.Func {
	fn, ok := p.info.Uses[id].(*types.Func)
	if !ok || fn.Pkg() != p.types {
		return nil
	}
	if recv := fn.Signature().Recv(); recv != nil && types.IsInterface(recv.Type()) {
		return nil // an interface's method (or a type parameter's): dynamic
	}
	return fn.Origin()
}

// declName names a top-level declaration: "T.m", "f", or "var x" for an initializer.
func declName(decl ast.Decl) string {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if d.Recv != nil && len(d.Recv.List) == 1 {
			return recvName(d.Recv.List[0].Type) + "." + d.Name.Name
		}
		return d.Name.Name
	case *ast.GenDecl:
		for _, spec := range d.Specs {
			if v, ok := spec.(*ast.ValueSpec); ok && len(v.Names) > 0 {
				return d.Tok.String() + " " + v.Names[0].Name
			}
		}
		return d.Tok.String() + " declaration"
	}
	return "declaration"
}

// recvName is the name of a receiver's base type: T of T, *T, T[K] or *T[K].
func recvName(expr ast.Expr) string {
	for {
		switch e := expr.(type) {
		case *ast.StarExpr:
			expr = e.X
		case *ast.IndexExpr:
			expr = e.X
		case *ast.IndexListExpr:
			expr = e.X
		case *ast.ParenExpr:
			expr = e.X
		case *ast.Ident:
			return e.Name
		default:
			return fmt.Sprintf("%T", expr)
		}
	}
}

// funcName names fn as declName does.
func funcName(fn *types.Func) string {
	recv := fn.Signature().Recv()
	if recv == nil {
		return fn.Name()
	}
	t := types.Unalias(recv.Type())
	if ptr, ok := t.(*types.Pointer); ok {
		t = types.Unalias(ptr.Elem())
	}
	if named, ok := t.(*types.Named); ok {
		return named.Obj().Name() + "." + fn.Name()
	}
	return fn.Name()
}

func formatPairs(p *pkg, pairs []pair) string {
	var b strings.Builder
	for _, pr := range pairs {
		fmt.Fprintf(&b, "    %s <-> %s\n", pr.a, pr.b)
		for _, r := range []ref{pr.ab, pr.ba} {
			fmt.Fprintf(&b, "        %s %s -> %s (%s)\n",
				p.at(r.at), r.caller, funcName(r.callee), p.at(r.callee.Pos()))
		}
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// TestCallPairsCounting checks what callPairs counts on a small package.
func TestCallPairsCounting(t *testing.T) {
	src := map[string]string{
		"a.go": `package p
type T struct{ f func() }
type I interface{ m() }
func (T) m() {}
func A() { B() }          // a -> b
func A2() { go C() }      // a -> c
func A3() { D() }         // a -> d
func A4(i I) { i.m() }    // an interface: not counted`,
		"b.go": `package p
func B() { var t T; t.f() } // a func field: not counted
func B2() { _ = T.m }       // a method expression: b -> a`,
		"c.go": `package p
var callback = T{}.m // a method value: c -> a
func C() {}`,
		"d.go": `package p
func D() { var i I = T{}; i.m() } // a type and an interface: not counted`,
	}
	p := &pkg{fset: token.NewFileSet(), info: &types.Info{Uses: make(map[*ast.Ident]types.Object)}}
	for _, name := range []string{"a.go", "b.go", "c.go", "d.go"} {
		f, err := parser.ParseFile(p.fset, name, src[name], 0)
		if err != nil {
			t.Fatal(err)
		}
		p.files, p.names = append(p.files, f), append(p.names, name)
	}
	var err error
	if p.types, err = new(types.Config).Check("p", p.fset, p.files, p.info); err != nil {
		t.Fatal(err)
	}
	got := formatPairs(p, callPairs(p))
	want := `    a.go <-> b.go
        a.go:5 A -> B (b.go:2)
        b.go:3 B2 -> T.m (a.go:4)
    a.go <-> c.go
        a.go:6 A2 -> C (c.go:3)
        c.go:2 var callback -> T.m (a.go:4)`
	if got != want {
		t.Errorf("callPairs:\n%s\nwant:\n%s", got, want)
	}
}
