// Command dlock runs commands under distributed locks on Redis and shows what dlock does.
//
//	dlock demo    the flash sale: buyers race for limited stock, without and with a lock
//	dlock help    this text
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

const usage = `dlock: distributed locks on Redis

Usage:
  dlock demo [--redis URL] [--buyers N] [--stock N]
      The flash sale: N buyers race to buy from a stock of S items, first without a
      lock (the stock goes negative), then with a dlock Mutex (exactly S sold). With no
      --redis it runs on an embedded Redis, so it needs no set-up.
  dlock help
      This text.

Environment:
  DLOCK_REDIS   the server URL when --redis is not given (redis:// or rediss://)

Exit codes: 0 success, 1 failure, 2 bad usage.
`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run is main without the process: it returns the exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "demo":
		return demo(ctx, args[1:], stdout, stderr)
	case "help", "-h", "--help":
		fmt.Fprint(stdout, usage)
		return 0
	}
	fmt.Fprintf(stderr, "dlock: unknown command %q; run 'dlock help' for the list\n", args[0])
	return 2
}
