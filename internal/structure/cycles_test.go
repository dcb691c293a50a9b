package structure

import (
	"fmt"
	"sort"
	"strings"
	"testing"
)

// oneWay lists the packages whose files must refer to each other without any cycle, so
// that calls go one way, along the data flow (ARCHITECTURE.md): a file is read knowing
// only the files below it.
var oneWay = []string{"internal/engine"}

// TestCallsGoOneWay: in each package of oneWay, the references between files (as
// TestCallPairs counts them) form no cycle, of two files or more. On failure it shows one
// cycle, with the first reference of each step.
func TestCallsGoOneWay(t *testing.T) {
	for _, p := range packages(t) {
		if !contains(oneWay, p.rel) {
			continue
		}
		refs := fileRefs(p)
		if cycle := findCycle(refs); cycle != nil {
			var steps []string
			for i, from := range cycle {
				to := cycle[(i+1)%len(cycle)]
				r := refs[[2]string{from, to}]
				steps = append(steps, fmt.Sprintf("%s -> %s (%s: %s -> %s)", from, to, p.fset.Position(r.at), r.caller, funcName(r.callee)))
			}
			t.Errorf("%s: its files call each other in a cycle; make the calls go one way "+
				"(move what the lower file calls back into it, or pass a func it is given):\n    %s",
				p.rel, strings.Join(steps, "\n    "))
			continue
		}
		t.Logf("%s: %d files, their calls go one way", p.rel, len(p.names))
	}
}

// findCycle returns the files of one cycle of refs, in order, or nil when there is none.
func findCycle(refs map[[2]string]ref) []string {
	next := make(map[string][]string)
	for key := range refs {
		next[key[0]] = append(next[key[0]], key[1])
	}
	var files []string
	for f := range next {
		sort.Strings(next[f])
		files = append(files, f)
	}
	sort.Strings(files)
	const (
		unseen = iota
		open
		done
	)
	state := make(map[string]int)
	var stack []string
	var visit func(f string) []string
	visit = func(f string) []string {
		state[f] = open
		stack = append(stack, f)
		for _, g := range next[f] {
			switch state[g] {
			case open:
				i := len(stack) - 1
				for stack[i] != g {
					i--
				}
				return append([]string(nil), stack[i:]...)
			case unseen:
				if c := visit(g); c != nil {
					return c
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[f] = done
		return nil
	}
	for _, f := range files {
		if state[f] == unseen {
			if c := visit(f); c != nil {
				return c
			}
		}
	}
	return nil
}

// TestFindCycle: findCycle finds a cycle of two and of three files, and none in a chain.
func TestFindCycle(t *testing.T) {
	edges := func(pairs ...string) map[[2]string]ref {
		m := make(map[[2]string]ref)
		for _, p := range pairs {
			a, b, _ := strings.Cut(p, ">")
			m[[2]string{a, b}] = ref{}
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		refs  map[[2]string]ref
		cycle int // its length; 0: none
	}{
		{"chain", edges("a>b", "b>c", "a>c"), 0},
		{"two", edges("a>b", "b>a"), 2},
		{"three", edges("a>b", "b>c", "c>a", "c>d"), 3},
	} {
		if got := findCycle(tc.refs); len(got) != tc.cycle {
			t.Errorf("%s: findCycle = %v, want a cycle of %d", tc.name, got, tc.cycle)
		}
	}
}
