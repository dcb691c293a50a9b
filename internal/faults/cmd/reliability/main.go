// Command reliability writes RELIABILITY.md from the results of a fault-suite run
// (internal/faults, DLOCK_FAULTS_JSON). `make faults` runs it.
//
//	go run ./internal/faults/cmd/reliability -in results.json -out RELIABILITY.md
package main

import (
	"bytes"
	"flag"
	"fmt"
	"os"

	"github.com/seed51c676c8/dlock/internal/faults"
)

func main() {
	in := flag.String("in", "internal/faults/results/results.json", "the results of a fault-suite run")
	out := flag.String("out", "RELIABILITY.md", "the Markdown file to write")
	flag.Parse()
	if err := run(*in, *out); err != nil {
		fmt.Fprintln(os.Stderr, "reliability:", err)
		os.Exit(1)
	}
}

func run(in, out string) error {
	r, err := faults.Load(in)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if err := r.Markdown(&b); err != nil {
		return err
	}
	return os.WriteFile(out, b.Bytes(), 0o644)
}
