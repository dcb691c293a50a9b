// Package doctest checks the documents, README.md and the other Markdown files at the root
// and in docs/, against the code, so that they cannot drift from it: every ```go snippet
// in them compiles against the working tree's API, and every relative link in them leads
// to a file that exists, and to a heading that exists when it names one.
//
// It is a package of test files only, in the root module, using the standard library
// alone. A snippet is compiled where a user's code would be: each becomes a package of
// its own, placed by `go build -overlay` inside the module that provides what it imports
// (the root module, or a nested one such as extra/prometheus), so that it builds with
// that module's go.mod and go.sum, offline, and the repository's tree is never written.
// A //line directive makes every error point at the document and line of the snippet.
package doctest

import (
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
