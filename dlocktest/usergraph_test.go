package dlocktest_test

import (
	"strings"
	"testing"
)

// dlockOwnRequirements are the modules that dlock's go.mod may require beyond what
// go-redis, miniredis and miniredis's Lua require themselves: every module that dlock's
// go.mod lists is in each user's module graph (`go list -m all`), and so in their
// vulnerability scanner's report. The CLI's and the fault tests' dependencies stay out
// of it: cmd/dlock is a module of its own, and faultproxy uses the standard library.
var dlockOwnRequirements = []string{
	"github.com/redis/go-redis/v9",
	"github.com/alicebob/miniredis/v2",  // dlocktest.Embedded
	"go.uber.org/goleak",                // the tests of every package
	"github.com/anishathalye/porcupine", // the root package's linearizability check
}

// checkGraph fails t if the module graph of the user module in dir holds a module that
// dlock requires and that is neither in dlockOwnRequirements nor required by go-redis,
// miniredis or gopher-lua.
func checkGraph(t *testing.T, dir string) {
	t.Helper()
	required := make(map[string][]string) // module path -> the paths it requires
	for line := range strings.Lines(goCmd(t, dir, "mod", "graph")) {
		from, to, ok := strings.Cut(strings.TrimSpace(line), " ")
		if !ok {
			continue
		}
		from, _, _ = strings.Cut(from, "@")
		to, _, _ = strings.Cut(to, "@")
		required[from] = append(required[from], to)
	}
	allowed := map[string]bool{"go": true, "toolchain": true}
	for _, m := range dlockOwnRequirements {
		allowed[m] = true
	}
	for _, peer := range []string{"github.com/redis/go-redis/v9", "github.com/alicebob/miniredis/v2", "github.com/yuin/gopher-lua"} {
		for _, m := range required[peer] {
			allowed[m] = true
		}
	}
	for _, m := range required["github.com/seed51c676c8/dlock"] {
		if !allowed[m] {
			t.Errorf("dlock's go.mod requires %s, which enters every user's module graph; "+
				"a dependency of the CLI or of dlock's own tests belongs in a module of its own", m)
		}
	}
}
