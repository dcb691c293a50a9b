package dlockotel_test

import (
	"fmt"
	"os"
	"slices"
	"sync"
	"testing"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	code := m.Run()
	t.cleanup()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintf(os.Stderr, "goleak: %v\n", err)
			code = 1
		}
	}
	os.Exit(code)
}

// t stands, in the Example functions, for the *testing.T of a test: Example functions
// have none. What the examples start is stopped when the test binary ends.
var t = new(exampleT)

// exampleT is the part of testing.TB that dlocktest uses. A failure panics, which fails
// the example.
type exampleT struct {
	testing.TB // nil: the methods below are all there is

	mu       sync.Mutex
	cleanups []func()
}

func (*exampleT) Helper() {}

func (e *exampleT) Cleanup(f func()) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.cleanups = append(e.cleanups, f)
}

func (e *exampleT) TempDir() string {
	dir, err := os.MkdirTemp("", "dlock-otel-example-")
	if err != nil {
		panic(err)
	}
	e.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

func (*exampleT) Errorf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (*exampleT) Fatalf(format string, args ...any) { panic(fmt.Sprintf(format, args...)) }
func (*exampleT) Fatal(args ...any)                 { panic(fmt.Sprint(args...)) }

// cleanup runs the cleanups, the last registered first, as testing does.
func (e *exampleT) cleanup() {
	e.mu.Lock()
	fs := slices.Clone(e.cleanups)
	e.cleanups = nil
	e.mu.Unlock()
	for _, f := range slices.Backward(fs) {
		f()
	}
}
