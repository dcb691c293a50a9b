// Command dlock runs commands under distributed locks on Redis, inspects and repairs
// locks, and shows what dlock does.
//
//	dlock run [flags] NAME -- CMD [ARGS...]   run CMD while holding the lock NAME
//	dlock status [flags] NAME...              who holds the locks, with what token, for how long
//	dlock list [flags] [PATTERN]              the locks under the prefix
//	dlock top [flags] [PATTERN]               a live view of the locks, most waited for first
//	dlock leader [flags] NAME                 the leader of an election
//	dlock observe [flags] NAME                each change of an election's leader, as it happens
//	dlock unlock --force [flags] NAME...      remove a stuck lock
//	dlock demo [flags]                        the flash sale, without and with a lock
//	dlock bench [flags]                       throughput and wait times
//	dlock version                             which dlock this is
//	dlock help [COMMAND]                      the reference: flags, exit codes, environment
//
// 'dlock help' is the reference; README.md in this directory holds the same text.
package main

import (
	"fmt"
	"os"
	"strings"

	"github.com/redis/go-redis/v9"
	"github.com/spf13/pflag"
)

// command is one subcommand of dlock.
type command struct {
	name    string
	summary string // for the list in 'dlock help'
	help    string // 'dlock help NAME'
	hidden  bool   // internal: worker processes of demo and bench
	// flags returns a fresh flag set of the command, for the tests that check the help.
	flags func() *pflag.FlagSet
	run   func(c *cli, args []string) error
}

// commands is the table of subcommands; it is filled in init to break the reference
// cycle with the help command.
var commands []*command

func init() {
	commands = []*command{
		{name: "run", summary: runSummary, help: runHelp, flags: func() *pflag.FlagSet { return new(runCmd).flagSet() }, run: cmdRun},
		{name: "status", summary: statusSummary, help: statusHelp, flags: func() *pflag.FlagSet { return new(inspectCmd).flagSet("status") }, run: cmdStatus},
		{name: "list", summary: listSummary, help: listHelp, flags: func() *pflag.FlagSet { return new(inspectCmd).flagSet("list") }, run: cmdList},
		{name: "top", summary: topSummary, help: topCmdHelp, flags: func() *pflag.FlagSet { return new(topCmd).flagSet() }, run: cmdTop},
		{name: "leader", summary: leaderSummary, help: leaderHelp, flags: func() *pflag.FlagSet { return new(electCmd).flagSet("leader") }, run: cmdLeader},
		{name: "observe", summary: observeSummary, help: observeHelp, flags: func() *pflag.FlagSet { return new(electCmd).flagSet("observe") }, run: cmdObserve},
		{name: "unlock", summary: unlockSummary, help: unlockHelp, flags: func() *pflag.FlagSet { return new(unlockCmd).flagSet() }, run: cmdUnlock},
		{name: "demo", summary: demoSummary, help: demoHelp, flags: func() *pflag.FlagSet { return new(demoCmd).flagSet() }, run: cmdDemo},
		{name: "bench", summary: benchSummary, help: benchHelp, flags: func() *pflag.FlagSet { return new(benchCmd).flagSet() }, run: cmdBench},
		{name: "version", summary: versionSummary, help: versionHelp, flags: func() *pflag.FlagSet { return newFlagSet("version") }, run: cmdVersion},
		{name: "help", summary: helpSummary, help: helpHelp, run: cmdHelp},
		{name: demoBuyerCommand, hidden: true, run: cmdDemoBuyer},
		{name: benchWorkerCommand, hidden: true, run: cmdBenchWorker},
	}
}

func lookup(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

func main() {
	c := newCLI(os.Stdin, os.Stdout, os.Stderr, os.Getenv)
	os.Exit(c.main(os.Args[1:]))
}

// newCLI returns a cli that writes to stdout and stderr through a fresh redactor.
func newCLI(stdin, stdout, stderr *os.File, getenv func(string) string) *cli {
	red := new(redactor)
	return &cli{
		stdin: stdin, stdoutFile: stdout, stderrFile: stderr,
		stdout: red.Writer(stdout), stderr: red.Writer(stderr),
		red: red, getenv: getenv,
	}
}

// main runs one command line and returns the exit code.
func (c *cli) main(args []string) int {
	redis.SetLogger(redisLogger{}) // --verbose turns it on, through the redactor
	// Learn every secret before anything can be printed: the URLs in the environment and
	// anything on the command line that looks like one, wherever it is.
	c.red.addURL(strings.TrimSpace(c.getenv("REDIS_URL"))) // one URL: commas are its own
	for _, env := range []string{"DLOCK_REDIS", workerServersEnv} {
		for _, u := range strings.FieldsFunc(c.getenv(env), func(r rune) bool { return r == ',' || r == '\n' }) {
			c.red.addURL(u)
		}
	}
	for _, a := range args {
		if strings.Contains(a, "://") {
			c.red.addURL(a)
			if _, v, ok := strings.Cut(a, "="); ok {
				c.red.addURL(v)
			}
		}
	}
	if len(args) == 0 {
		fmt.Fprint(c.stderrFile, topHelp())
		return exitUsage
	}
	name := args[0]
	switch name {
	case "-h", "-help", "--help":
		name = "help"
	case "--version", "-version":
		name = "version"
	}
	cmd := lookup(name)
	if cmd == nil {
		fmt.Fprintf(c.stderr, "dlock: unknown command %q; run 'dlock help' for the list of commands\n", name)
		return exitUsage
	}
	err := cmd.run(c, args[1:])
	if err == errHelp {
		fmt.Fprint(c.stdoutFile, cmd.help)
		return exitOK
	}
	return c.report(cmd.name, err)
}

// cmdHelp prints the reference, or one command's help. The help is constant text, written
// as it is: the redactor would mask the example URLs.
func cmdHelp(c *cli, args []string) error {
	switch {
	case len(args) == 0:
		fmt.Fprint(c.stdoutFile, topHelp())
		return nil
	case len(args) > 1:
		return usage("help", "give one command, such as 'dlock help run'")
	}
	cmd := lookup(args[0])
	if cmd == nil || cmd.hidden {
		return usage("help", "unknown command %q; run 'dlock help' for the list of commands", args[0])
	}
	fmt.Fprint(c.stdoutFile, cmd.help)
	return nil
}
