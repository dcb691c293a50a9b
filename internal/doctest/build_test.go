package doctest

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// snippetDir is where, inside its module, a snippet's package is placed by the overlay.
// Nothing is written there: the directory exists only for the go command.
const snippetDir = "doctest_snippets"

// TestSnippetsCompile compiles every ```go snippet of the documents (go build),
// in the module that provides what it imports. A snippet that does not compile fails the
// test with the compiler's message at the document's line.
//
// go build, not go vet: the vet tool runs in the package's directory, which exists only
// in the overlay.
func TestSnippetsCompile(t *testing.T) {
	var all []snippet
	for _, d := range documents(t) {
		all = append(all, d.snippets()...)
	}
	if len(all) == 0 {
		t.Fatal("no ```go snippet in the documents: README.md has at least one")
	}
	byModule := make(map[string][]rendered) // by module directory, from the root
	for _, s := range all {
		r, err := render(s)
		if err == nil {
			var mod string
			mod, err = moduleOf(r.imports)
			byModule[mod] = append(byModule[mod], r)
		}
		if err != nil {
			t.Errorf("%s: %v", s, err)
		}
	}
	for _, mod := range slices.Sorted(maps.Keys(byModule)) {
		out, err := buildSnippets(t, mod, byModule[mod])
		if err != nil {
			t.Errorf("the snippets placed in module %s do not all compile (%v):\n%s",
				mod, err, out)
		}
	}
	t.Logf("%d snippets checked, in %d modules", len(all), len(byModule))
}

// TestBrokenSnippetFails shows that the check can fail, and says where: a snippet that
// calls a method the API does not have is refused, at its line of its document.
func TestBrokenSnippetFails(t *testing.T) {
	r, err := render(snippet{doc: "docs/broken.md", line: 7,
		code: "lease, err := client.Mutex(\"x\").Lock(ctx)\nif err != nil {\n\treturn err\n}\nreturn lease.Renew(ctx)\n"})
	if err != nil {
		t.Fatal(err)
	}
	out, err := buildSnippets(t, ".", []rendered{r})
	if err == nil {
		t.Fatalf("a snippet calling a method that does not exist compiled:\n%s", r.src)
	}
	if !strings.Contains(out, "docs/broken.md:11") || !strings.Contains(out, "Renew") {
		t.Errorf("the error does not point at docs/broken.md:11 and the missing method:\n%s", out)
	}
}

// moduleOf returns the directory, from the root, of the module that provides the
// repository's packages among paths: "." for the root module, or the deepest nested
// module (a directory with a go.mod) that holds one of them.
func moduleOf(paths []string) (string, error) {
	mod := "."
	for _, p := range paths {
		rel, ok := strings.CutPrefix(p, modulePath+"/")
		if !ok {
			continue
		}
		for dir := rel; dir != "." && dir != "/"; dir = path.Dir(dir) {
			if _, err := os.Stat(filepath.Join(root, filepath.FromSlash(dir), "go.mod")); err == nil {
				if mod != "." && mod != dir {
					return "", fmt.Errorf("imports from two modules of the repository, %s and %s", mod, dir)
				}
				mod = dir
				break
			}
		}
	}
	return mod, nil
}

// buildSnippets runs go build over the snippets rs, each a package of its own placed by an
// overlay inside the module at mod (from the root), and returns its output.
func buildSnippets(t *testing.T, mod string, rs []rendered) (string, error) {
	modDir, err := filepath.Abs(filepath.Join(root, filepath.FromSlash(mod)))
	if err != nil {
		return "", err
	}
	tmp := t.TempDir()
	preludeFile := filepath.Join(tmp, "prelude.go")
	if err := os.WriteFile(preludeFile, []byte(prelude), 0o644); err != nil {
		return "", err
	}
	replace := make(map[string]string)
	args := []string{"build", "-buildvcs=false", "-overlay", filepath.Join(tmp, "overlay.json")}
	for i, r := range rs {
		name := fmt.Sprintf("s%02d", i+1)
		file := filepath.Join(tmp, name+".go")
		if err := os.WriteFile(file, []byte(r.src), 0o644); err != nil {
			return "", err
		}
		pkgDir := filepath.Join(modDir, snippetDir, name)
		replace[filepath.Join(pkgDir, "snippet.go")] = file
		if !r.whole {
			replace[filepath.Join(pkgDir, "prelude.go")] = preludeFile
		}
		args = append(args, "./"+snippetDir+"/"+name)
	}
	overlay, err := json.Marshal(map[string]any{"Replace": replace})
	if err != nil {
		return "", err
	}
	if err := os.WriteFile(filepath.Join(tmp, "overlay.json"), overlay, 0o644); err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", args...)
	cmd.Dir = modDir
	// Offline: every module a snippet needs is in the module cache once the module's
	// own packages have been built, which `make test` does before this test runs.
	cmd.Env = append(os.Environ(), "GOPROXY=off")
	out, err := cmd.CombinedOutput()
	return string(out), err
}
