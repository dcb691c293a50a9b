module github.com/seed51c676c8/dlock/cmd/dlock

go 1.26.0

require (
	github.com/alicebob/miniredis/v2 v2.40.0
	github.com/jedib0t/go-pretty/v6 v6.8.3
	github.com/mattn/go-runewidth v0.0.31
	github.com/redis/go-redis/v9 v9.23.0
	github.com/seed51c676c8/dlock v0.0.0-00010101000000-000000000000
	github.com/spf13/pflag v1.1.0
	go.uber.org/goleak v1.3.0
	golang.org/x/term v0.47.0
)

require (
	github.com/cespare/xxhash/v2 v2.3.0 // indirect
	github.com/clipperhouse/uax29/v2 v2.2.0 // indirect
	github.com/yuin/gopher-lua v1.1.1 // indirect
	go.uber.org/atomic v1.12.0 // indirect
	golang.org/x/sys v0.49.0 // indirect
	golang.org/x/text v0.22.0 // indirect
)

// Within this repository, the dlock module two levels up: the CLI is built from the
// library beside it (and uses its internal packages, which Go allows by import path).
// `go install github.com/seed51c676c8/dlock/cmd/dlock@VERSION` refuses a module with a
// replace, so a tagged release of the CLI drops it and requires a tagged dlock.
replace github.com/seed51c676c8/dlock => ../..
