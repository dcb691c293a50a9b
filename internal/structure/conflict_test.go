package structure

import (
	"bufio"
	"bytes"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNoConflictMarkers: no file of the repository keeps a merge's conflict markers. A
// document with them still builds and its snippets still compile, so nothing else would
// notice. A Markdown heading may be underlined with "=======", so only the two outer
// markers count. The tree is walked, not listed by git, so that the check needs no git
// checkout; hidden directories (.git, .bin) are passed over.
func TestNoConflictMarkers(t *testing.T) {
	root := repositoryRoot(t)
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		switch {
		case err != nil:
			return err
		case d.IsDir() && path != root && strings.HasPrefix(d.Name(), "."):
			return filepath.SkipDir
		case d.IsDir() || !d.Type().IsRegular():
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil || bytes.IndexByte(data, 0) >= 0 {
			return err // binary files are passed over
		}
		for i, line := range lines(data) {
			if strings.HasPrefix(line, "<<<<<<< ") || strings.HasPrefix(line, ">>>>>>> ") {
				rel, _ := filepath.Rel(root, path)
				t.Errorf("%s:%d: a merge's conflict marker %q: resolve the conflict", rel, i+1, line)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// lines splits data into its lines.
func lines(data []byte) []string {
	var ls []string
	s := bufio.NewScanner(bytes.NewReader(data))
	s.Buffer(nil, len(data)+1)
	for s.Scan() {
		ls = append(ls, s.Text())
	}
	return ls
}
