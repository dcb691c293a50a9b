// Package cli runs an example's run function as a command: flags, interrupts, exit codes.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// Run is an example's main logic: it parses args, writes its report to stdout and returns
// what went wrong.
type Run func(ctx context.Context, args []string, stdout io.Writer) error

// errUsage marks a flag error that the flag package has already printed.
var errUsage = errors.New("usage")

// Main runs run with the command-line arguments and exits: 0 on success (and for -h), 2
// for bad flags, 1 for any other error, which it prints. An interrupt (Ctrl-C) or SIGTERM
// cancels run's context.
func Main(name string, run Run) {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout)
	stop()
	switch {
	case err == nil, errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	case errors.Is(err, errUsage):
		os.Exit(2)
	default:
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		os.Exit(1)
	}
}

// Parse parses args with fs, which reports flag errors and -h on stderr. Its error, if
// any, tells Main not to print it again.
func Parse(fs *flag.FlagSet, args []string) error {
	fs.SetOutput(os.Stderr)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return fmt.Errorf("%w: %v", errUsage, err)
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(os.Stderr, "unexpected arguments: %q\n", fs.Args())
		fs.Usage()
		return fmt.Errorf("%w: unexpected arguments %q", errUsage, fs.Args())
	}
	return nil
}
